package admin_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/store"
)

const (
	sharedKey  = "sk-ant-api03-SHARED-0123456789"
	ownerKey   = "sk-ant-api03-OWNER-0123456789"
	visitorKey = "sk-ant-api03-VISITOR-0123456789"
)

func TestAdmin_Payer(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	box := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.Report(box, brokertest.Entry("inference", "agent"))
	ctx := context.Background()
	principal := "github:own"

	bad := []struct {
		name   string
		path   string
		body   any
		status int
	}{
		{"unknown kind", "/api/boxes/alpha/payer", map[string]any{"kind": "visitor"}, 400},
		{"no kind", "/api/boxes/alpha/payer", map[string]any{}, 400},
		{"shared with a value", "/api/boxes/alpha/payer", operator.PayerSetting{Kind: "shared", Value: ownerKey}, 400},
		{"shared with a principal", "/api/boxes/alpha/payer", operator.PayerSetting{Kind: "shared", Principal: &principal}, 400},
		{"owner with no value", "/api/boxes/alpha/payer", operator.PayerSetting{Kind: "owner", Principal: &principal}, 400},
		{"owner with a bad principal", "/api/boxes/alpha/payer", map[string]any{"kind": "owner", "principal": "git hub", "value": ownerKey}, 400},
		{"owner value with a line break", "/api/boxes/alpha/payer", operator.PayerSetting{Kind: "owner", Value: ownerKey + "\r\nX-Evil: 1"}, 400},
		{"unknown field", "/api/boxes/alpha/payer", map[string]any{"kind": "owner", "value": ownerKey, "key": "x"}, 400},
		{"no box", "/api/boxes/nobox/payer", operator.PayerSetting{Kind: "owner", Value: ownerKey}, 404},
		{"bad box name", "/api/boxes/No!/payer", operator.PayerSetting{Kind: "shared"}, 400},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Admin("PUT", tt.path, tok, tt.body)
			refusal(t, "PUT "+tt.path+" "+tt.name, resp, tt.status)
			if bytes.Contains(resp.Body, []byte(ownerKey[8:])) {
				t.Errorf("PUT %s %s: the refusal echoed the value: %s", tt.path, tt.name, resp.Body)
			}
		})
	}
	if _, err := b.Server.Store.Credential(ctx, payer.OwnerAnthropic("alpha")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner's credential after refused PUTs: %v, want none stored", err)
	}
	b.PaidBy(t, box, "", "shared", sharedKey)

	var v operator.BoxView
	resp := b.Admin("PUT", "/api/boxes/alpha/payer", tok, operator.PayerSetting{Kind: "owner", Principal: &principal, Value: ownerKey})
	decode(t, "PUT payer owner", resp, 200, &v)
	if v.Payer.Kind != "owner" || v.Payer.Principal == nil || *v.Payer.Principal != principal {
		t.Errorf("PUT payer owner = %+v, want owner %s", v.Payer, principal)
	}
	if bytes.Contains(resp.Body, []byte(ownerKey)) {
		t.Errorf("PUT payer echoed the owner's key: %s", resp.Body)
	}
	c, err := b.Server.Store.Credential(ctx, payer.OwnerAnthropic("alpha"))
	if err != nil {
		t.Fatalf("owner's credential after PUT payer owner: %v", err)
	}
	if pt, err := b.Server.Keyring.Open(c.Sealed, payer.AD(payer.OwnerAnthropic("alpha"))); err != nil || string(pt) != ownerKey {
		t.Errorf("sealed owner's credential opens to %q, %v, want the value put", pt, err)
	}
	// The box's next call is paid by its owner, and its declaration says so.
	b.PaidBy(t, box, "", "owner "+principal, ownerKey)
	if kept := b.Report(box, brokertest.Entry("inference", "agent")); kept.Payer == nil || kept.Payer.Kind != "owner" {
		t.Errorf("declaration payer = %+v, want owner", kept.Payer)
	}
	decode(t, "GET box", b.Admin("GET", "/api/boxes/alpha", tok, nil), 200, &v)
	if v.Payer.Kind != "owner" {
		t.Errorf("GET box payer = %+v, want owner", v.Payer)
	}

	var pv operator.PayerView
	decode(t, "PUT payer shared", b.Admin("PUT", "/api/boxes/alpha/payer", tok, operator.PayerSetting{Kind: "shared"}), 200, &pv)
	if pv.Payer.Kind != "shared" || pv.Payer.Principal != nil || !pv.CredentialRemoved {
		t.Errorf("PUT payer shared = %+v removed %v, want shared with no principal, credential removed", pv.Payer, pv.CredentialRemoved)
	}
	if _, err := b.Server.Store.Credential(ctx, payer.OwnerAnthropic("alpha")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner's credential after PUT payer shared: %v, want removed", err)
	}
	b.PaidBy(t, box, "", "shared", sharedKey)
	// Shared again: there is no credential left, and the answer says so.
	resp = b.Admin("PUT", "/api/boxes/alpha/payer", tok, operator.PayerSetting{Kind: "shared"})
	decode(t, "PUT payer shared again", resp, 200, &pv)
	if pv.CredentialRemoved || !bytes.Contains(resp.Body, []byte(`"credentialRemoved": false`)) {
		t.Errorf("PUT payer shared again = %s, want credentialRemoved false", resp.Body)
	}
}

// TestAdmin_RemoveBoxRemovesOwnersCredential: the owner's credential is
// the box's alone, and a box of the same name made later must not be paid
// with it.
func TestAdmin_RemoveBoxRemovesOwnersCredential(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	decode(t, "PUT payer owner", b.Admin("PUT", "/api/boxes/alpha/payer", b.AdminToken, operator.PayerSetting{Kind: "owner", Value: ownerKey}), 200, nil)
	if resp := b.Admin("DELETE", "/api/boxes/alpha", b.AdminToken, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE box = %d %s", resp.StatusCode, resp.Body)
	}
	if _, err := b.Server.Store.Credential(context.Background(), payer.OwnerAnthropic("alpha")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner's credential after DELETE box: %v, want removed", err)
	}
}

func TestAdmin_Visitors(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	b.SetCredential(payer.SharedAnthropic, sharedKey) // not a visitor; not listed

	var vv operator.VisitorView
	resp := b.Admin("PUT", "/api/visitors/github:ann", tok, admin.CredentialValue{Value: visitorKey})
	decode(t, "PUT visitor", resp, 200, &vv)
	if vv.Principal != "github:ann" || vv.Kind != "API key" || vv.UpdatedAt == "" {
		t.Errorf("PUT visitor = %+v, want github:ann with an API key", vv)
	}
	if bytes.Contains(resp.Body, []byte(visitorKey)) {
		t.Errorf("PUT visitor echoed the value: %s", resp.Body)
	}
	c, err := b.Server.Store.Credential(context.Background(), payer.VisitorAnthropic("github:ann"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := b.Server.Keyring.Open(c.Sealed, payer.AD(payer.VisitorAnthropic("github:ann"))); err != nil || string(pt) != visitorKey {
		t.Errorf("sealed visitor's credential opens to %q, %v, want the value put", pt, err)
	}
	// A principal with a slash, escaped in the path.
	decode(t, "PUT visitor with a slash", b.Admin("PUT", "/api/visitors/"+url.PathEscape("gitlab:group/ann"), tok, admin.CredentialValue{Value: "sk-ant-oat01-x"}), 200, &vv)
	if vv.Principal != "gitlab:group/ann" || vv.Kind != "setup token" {
		t.Errorf("PUT visitor gitlab:group/ann = %+v, want it with a setup token", vv)
	}

	var list operator.VisitorList
	resp = b.Admin("GET", "/api/visitors", tok, nil)
	decode(t, "GET visitors", resp, 200, &list)
	var names []string
	for _, v := range list.Visitors {
		names = append(names, v.Principal)
	}
	if got := strings.Join(names, ","); got != "github:ann,gitlab:group/ann" {
		t.Errorf("GET visitors = %s, want github:ann,gitlab:group/ann", got)
	}
	if bytes.Contains(resp.Body, []byte(visitorKey)) || bytes.Contains(resp.Body, []byte(sharedKey)) {
		t.Errorf("GET visitors shows a value: %s", resp.Body)
	}

	bad := []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"space in principal", "PUT", "/api/visitors/git%20hub", admin.CredentialValue{Value: visitorKey}, 400},
		{"empty value", "PUT", "/api/visitors/github:bob", admin.CredentialValue{}, 400},
		{"line break", "PUT", "/api/visitors/github:bob", admin.CredentialValue{Value: "a\nb"}, 400},
		{"too long principal", "PUT", "/api/visitors/" + strings.Repeat("a", 201), admin.CredentialValue{Value: visitorKey}, 400},
		{"remove unknown", "DELETE", "/api/visitors/github:bob", nil, 404},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			refusal(t, tt.method+" "+tt.path, b.Admin(tt.method, tt.path, tok, tt.body), tt.status)
		})
	}
	if resp := b.Admin("DELETE", "/api/visitors/github:ann", tok, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE visitor = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	refusal(t, "DELETE visitor again", b.Admin("DELETE", "/api/visitors/github:ann", tok, nil), 404)
	if _, err := b.Server.Store.Credential(context.Background(), payer.VisitorAnthropic("github:ann")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("visitor's credential after DELETE: %v, want removed", err)
	}
}
