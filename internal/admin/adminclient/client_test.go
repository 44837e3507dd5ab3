package adminclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin/adminclient"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// visitorKey is a visitor's Anthropic key, as a visitor would set it.
const visitorKey = "sk-ant-api03-VISITOR-0123456789"

func TestClient(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	c, err := adminclient.New(b.AdminURL, b.AdminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := c.AddBox(ctx, operator.NewBox{Name: "alpha"})
	if err != nil || bt.Token == "" {
		t.Fatalf("AddBox = %+v, %v", bt, err)
	}
	b.Report(bt.Token)
	boxes, next, err := c.BoxPage(ctx, 10, "")
	if err != nil || len(boxes) != 1 || boxes[0].ReportedAt == nil || next != "" {
		t.Errorf("BoxPage = %+v, %q, %v, want alpha, reported, and no next page", boxes, next, err)
	}
	rt, err := c.RotateBoxWith(ctx, "alpha", operator.TokenRotation{})
	if err != nil || rt.Token == bt.Token {
		t.Errorf("RotateBoxWith = %v, want a new token", err)
	}
	if _, err := c.SetCredential(ctx, "fountain", "", []byte("fk-1")); err != nil {
		t.Errorf("SetCredential = %v", err)
	}
	creds, err := c.ListCredentials(ctx)
	if err != nil || len(creds) != 1 || creds[0].ID != "fountain" {
		t.Errorf("ListCredentials = %+v, %v, want fountain", creds, err)
	}
	if err := c.RemoveCredential(ctx, "fountain"); err != nil {
		t.Errorf("RemoveCredential = %v", err)
	}
	if err := c.RemoveBox(ctx, "alpha"); err != nil {
		t.Errorf("RemoveBox = %v", err)
	}
	var ae *adminclient.APIError
	err = c.RemoveBox(ctx, "alpha")
	if !errors.As(err, &ae) || ae.Status != 404 || !strings.Contains(ae.Message, "alpha") {
		t.Errorf("RemoveBox(removed) = %v, want a 404 APIError naming alpha", err)
	}

	wrong, err := adminclient.New(b.AdminURL, "bba_wrong", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = wrong.BoxPage(ctx, 10, "")
	if !errors.As(err, &ae) || ae.Status != 401 || strings.Contains(err.Error(), "bba_wrong") {
		t.Errorf("BoxPage with a wrong token = %v, want a 401 that does not repeat the token", err)
	}
}

func TestNew_RefusesCleartextElsewhere(t *testing.T) {
	tests := []struct {
		url, token string
		ok         bool
	}{
		{"http://127.0.0.1:8788", "t", true},
		{"http://localhost:8788/", "t", true},
		{"http://[::1]:8788", "t", true},
		{"https://broker.example.com", "t", true},
		{"http://broker.example.com", "t", false},
		{"http://10.0.0.1:8788", "t", false},
		{"https://u:p@broker.example.com", "t", false},
		{"ftp://broker.example.com", "t", false},
		{"http://127.0.0.1:8788", "", false},
	}
	for _, tt := range tests {
		_, err := adminclient.New(tt.url, tt.token, nil)
		if (err == nil) != tt.ok {
			t.Errorf("New(%q, %q) = %v, want ok %v", tt.url, tt.token, err, tt.ok)
		}
	}
}

// TestClient_PrincipalWithASlash: a principal holding a slash is one path
// segment through the client, not two.
func TestClient_PrincipalWithASlash(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	c, err := adminclient.New(b.AdminURL, b.AdminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	const p = "gitlab:group/ann"
	if v, err := c.SetVisitor(ctx, p, "", []byte(visitorKey)); err != nil || v.Principal != p {
		t.Fatalf("SetVisitor(%q) = %+v, %v, want it set", p, v, err)
	}
	if _, err := b.Server.Store.Credential(ctx, payer.VisitorAnthropic(p)); err != nil {
		t.Errorf("Credential(visitor:%s) after SetVisitor = %v", p, err)
	}
	if err := c.RemoveVisitor(ctx, p); err != nil {
		t.Errorf("RemoveVisitor(%q) = %v", p, err)
	}
	if vs, err := c.ListVisitors(ctx); err != nil || len(vs) != 0 {
		t.Errorf("ListVisitors after removing = %+v, %v, want none", vs, err)
	}
}

// TestClient_MalformedAnswerRepeatingTheTokenIsNeverPrinted: an admin URL
// that answers with the Authorization it was sent as its status line
// makes Go's transport fail with an error that quotes the admin token;
// the error the CLI prints holds no trace of it.
func TestClient_MalformedAnswerRepeatingTheTokenIsNeverPrinted(t *testing.T) {
	const token = "bbadm_ECHOED0123456789abcdefghij"
	c, err := adminclient.New("http://"+upstreamtest.EchoStatus(t), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.BoxPage(context.Background(), 10, "")
	if err == nil || !strings.Contains(err.Error(), "malformed HTTP") {
		t.Fatalf("BoxPage = %v, want the transport's error, or this test shows nothing", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("the error holds the admin token: %v", err)
	}
}
