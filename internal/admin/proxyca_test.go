package admin_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// certsIn parses the PEM certificates in s.
func certsIn(t *testing.T, s string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := []byte(s)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			t.Fatalf("a PEM block of type %q in %q, want certificates only", block.Type, s)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// TestAdmin_ProxyCA: GET /api/proxy/ca hands out the CA a box trusts;
// POST /api/proxy/ca/rotate makes a new one, audited, which GET hands
// out beside the current one until its moment, or alone with a grace of
// 0s.
func TestAdmin_ProxyCA(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	var v operator.ProxyCAView
	decode(t, "GET /api/proxy/ca", b.Admin("GET", "/api/proxy/ca", b.AdminToken, nil), 200, &v)
	first := certsIn(t, v.Certificates)
	if len(first) != 1 || !first[0].IsCA || v.NextFrom != nil {
		t.Fatalf("GET /api/proxy/ca = %d certificates, next from %v, want one CA and none pending", len(first), v.NextFrom)
	}
	if again := b.Admin("GET", "/api/proxy/ca", b.AdminToken, nil); !strings.Contains(string(again.Body), strings.ReplaceAll(v.Certificates, "\n", `\n`)) {
		t.Errorf("a second GET /api/proxy/ca = %s, want the same CA", again.Body)
	}

	var r operator.ProxyCARotation
	before := time.Now()
	decode(t, "POST /api/proxy/ca/rotate", b.Admin("POST", "/api/proxy/ca/rotate", b.AdminToken, map[string]string{"grace": "24h"}), 200, &r)
	fresh := certsIn(t, r.Certificate)
	from, err := time.Parse(time.RFC3339, r.From)
	if len(fresh) != 1 || fresh[0].Equal(first[0]) || err != nil || from.Before(before.Add(24*time.Hour-time.Second)) || from.After(time.Now().Add(24*time.Hour)) {
		t.Fatalf("rotate with a grace of 24h = %d certificates from %q (%v), want one new CA a day from now", len(fresh), r.From, err)
	}
	entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 1})
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit = %v, %v", entries, err)
	}
	if e := entries[0]; e.Method != "POST" || e.Route != "/api/proxy/ca/rotate" || e.Capability != store.ActorAdmin || e.Status != 200 ||
		e.Message != "rotated the egress proxy's CA; the new one signs from "+r.From+byToken(t, b, b.AdminToken) {
		t.Errorf("the rotation's audit row = %s %s %d %q by %s", e.Method, e.Route, e.Status, e.Message, e.Capability)
	}
	decode(t, "GET /api/proxy/ca", b.Admin("GET", "/api/proxy/ca", b.AdminToken, nil), 200, &v)
	if got := certsIn(t, v.Certificates); len(got) != 2 || !got[0].Equal(first[0]) || !got[1].Equal(fresh[0]) || v.NextFrom == nil || *v.NextFrom != r.From {
		t.Errorf("GET /api/proxy/ca during the grace = %d certificates, next from %v, want the current and the new from %s", len(got), v.NextFrom, r.From)
	}

	// An empty body rotates with the default grace of a week; 0s at once.
	resp := b.Admin("POST", "/api/proxy/ca/rotate", b.AdminToken, nil)
	decode(t, "POST /api/proxy/ca/rotate with no body", resp, 200, &r)
	if from, _ := time.Parse(time.RFC3339, r.From); from.Before(before.Add(7*24*time.Hour - time.Second)) {
		t.Errorf("rotate with no body signs from %s, want a week from now", r.From)
	}
	decode(t, "POST /api/proxy/ca/rotate 0s", b.Admin("POST", "/api/proxy/ca/rotate", b.AdminToken, map[string]string{"grace": "0s"}), 200, &r)
	now := certsIn(t, r.Certificate)
	decode(t, "GET /api/proxy/ca", b.Admin("GET", "/api/proxy/ca", b.AdminToken, nil), 200, &v)
	if got := certsIn(t, v.Certificates); len(got) != 1 || !got[0].Equal(now[0]) || v.NextFrom != nil {
		t.Errorf("GET /api/proxy/ca after a rotation with no grace = %d certificates, next from %v, want the newest alone", len(got), v.NextFrom)
	}
}

// TestAdmin_ProxyCARotateRefusesBadBodies: a rotation's body is bounded
// and checked, and a refused one rotates nothing.
func TestAdmin_ProxyCARotateRefusesBadBodies(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	var v operator.ProxyCAView
	decode(t, "GET /api/proxy/ca", b.Admin("GET", "/api/proxy/ca", b.AdminToken, nil), 200, &v)
	tests := []struct {
		name   string
		body   string
		ctype  string
		status int
	}{
		{"not a duration", `{"grace":"soon"}`, "application/json", http.StatusBadRequest},
		{"below zero", `{"grace":"-1h"}`, "application/json", http.StatusBadRequest},
		{"a number", `{"grace":3600}`, "application/json", http.StatusBadRequest},
		{"an unknown field", `{"grace":"1h","now":true}`, "application/json", http.StatusBadRequest},
		{"two values", `{"grace":"1h"}{}`, "application/json", http.StatusBadRequest},
		{"not JSON", `grace=1h`, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"over the bound", `{"grace":"` + strings.Repeat("1", 70<<10) + `h"}`, "application/json", http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refusal(t, tt.name, rotateWith(t, b, tt.body, tt.ctype), tt.status)
		})
	}
	var after operator.ProxyCAView
	decode(t, "GET /api/proxy/ca", b.Admin("GET", "/api/proxy/ca", b.AdminToken, nil), 200, &after)
	if after.Certificates != v.Certificates || after.NextFrom != nil {
		t.Errorf("refused rotations changed the CA")
	}
	if entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 1}); err != nil || (len(entries) == 1 && strings.Contains(entries[0].Message, "rotated")) {
		t.Errorf("a refused rotation wrote an audit row: %v, %v", entries, err)
	}
}

// rotateWith posts body, of type ctype, to POST /api/proxy/ca/rotate.
func rotateWith(t *testing.T, b *brokertest.Broker, body, ctype string) brokertest.Response {
	t.Helper()
	req, err := http.NewRequest("POST", b.AdminURL+"/api/proxy/ca/rotate", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.AdminToken)
	req.Header.Set("Content-Type", ctype)
	resp, err := b.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return brokertest.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: rb}
}

// TestProxyCA_KeyNeverInAnswerLogOrAudit: no answer of the CA's routes,
// no log line and no audit row carries the key of either CA the store
// holds (the current one and a rotation's), searched for as its PEM
// body (base64 of the DER), whole and line by line.
func TestProxyCA_KeyNeverInAnswerLogOrAudit(t *testing.T) {
	var logs brokertest.Buffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs})
	ctx := context.Background()
	var seen []string
	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/proxy/ca", nil},
		{"POST", "/api/proxy/ca/rotate", map[string]string{"grace": "24h"}},
		{"GET", "/api/proxy/ca", nil},
		{"POST", "/api/proxy/ca/rotate", map[string]string{"grace": "48h"}},
		{"POST", "/api/proxy/ca/rotate", map[string]string{"grace": "soon"}},
		{"GET", "/api/proxy/ca", nil},
	} {
		resp := b.Admin(rq.method, rq.path, b.AdminToken, rq.body)
		seen = append(seen, fmt.Sprintf("%s %s: %v %s", rq.method, rq.path, resp.Header, resp.Body))
	}
	entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := json.Marshal(entries)
	seen = append(seen, "audit: "+string(rows), "logs: "+logs.String())

	rec, err := b.Server.Store.ProxyCA(ctx)
	if err != nil || len(rec.NextSealedKey) == 0 {
		t.Fatalf("the store's CA: %v, a rotation pending %v", err, len(rec.NextSealedKey) > 0)
	}
	for i, sealed := range [][]byte{rec.SealedKey, rec.NextSealedKey} {
		der, err := b.Server.Keyring.Open(sealed, "proxy-ca") // the additional data package proxyca seals it with
		if err != nil {
			t.Fatal(err)
		}
		body := base64.StdEncoding.EncodeToString(der)
		lines := strings.Split(strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))), "\n")
		needles := append([]string{body}, lines[1:len(lines)-1]...)
		for _, s := range seen {
			if strings.Contains(s, "PRIVATE KEY") {
				t.Errorf("%.40s… holds a PEM private key", s)
			}
			for _, n := range needles {
				if strings.Contains(s, n) {
					t.Errorf("%.40s… holds CA %d's private key", s, i)
				}
			}
		}
	}
}

// TestAdmin_FormBodySaysHowToSendJSON: a JSON body sent as curl sends
// one by default (application/x-www-form-urlencoded) is refused with a
// message that names the header to send, so an operator who followed a
// curl example knows what to add.
func TestAdmin_FormBodySaysHowToSendJSON(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	msg := refusal(t, "a form-encoded JSON body", rotateWith(t, b, `{"grace":"1h"}`, "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType)
	if !strings.Contains(msg, "Content-Type: application/json") {
		t.Errorf("415 message = %q, want it to say to send Content-Type: application/json", msg)
	}
}
