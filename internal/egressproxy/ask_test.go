package egressproxy_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/store"
)

// TestProxy_UnknownHostAskedThenPassedThrough: with the box's owner
// asking about unknown hosts, a CONNECT to a host with no secret and no
// passthrough entry is refused and opens a proposal its refusal names;
// once approved, the same CONNECT is a passthrough tunnel (the host's
// own certificate, no secret in it), and another host is still refused.
// (The stand-in host is on loopback, which an approved host is reached
// at only when Reach allows it, as here.)
func TestProxy_UnknownHostAskedThenPassedThrough(t *testing.T) {
	f := newFixtureProxy(t, nil, nil, func(c *egressproxy.Config) {
		c.Reach = func(a netip.Addr) bool { return a.IsLoopback() || egressproxy.Public(a) }
	})
	unknown := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "unknown host; auth="+r.Header.Get("Authorization"))
	}))
	t.Cleanup(unknown.Close)
	addr := unknown.Listener.Addr().String()
	if err := f.b.Server.Approvals.SetAsk(t.Context(), "shop", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	resp, body, _ := connect(t, f, addr, basic(f.token))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT %s = %d %s, want 403", addr, resp.StatusCode, body)
	}
	ps, err := f.b.Server.Approvals.List(t.Context(), "shop", store.ProposalPending)
	if err != nil || len(ps) != 1 || ps[0].Kind != store.ProposalHost || ps[0].Host != addr {
		t.Fatalf("pending = %+v, %v; want one for host %s", ps, err, addr)
	}
	if _, msg := brokertest.Refusal([]byte(body)); !strings.Contains(msg, "boxbroker approve "+ps[0].ID) || !strings.Contains(msg, "No egress secret") {
		t.Errorf("refusal = %q, want it to name the proposal", msg)
	}
	if f.dials.count(addr) != 0 {
		t.Errorf("the refused CONNECT dialled %s", addr)
	}
	if _, err := f.b.Server.Approvals.Approve(t.Context(), ps[0].ID, 0, true, "test"); err != nil {
		t.Fatal(err)
	}
	resp, body, conn := connect(t, f, addr, basic(f.token))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s after approval = %d %s, want 200", addr, resp.StatusCode, body)
	}
	roots := x509.NewCertPool()
	roots.AddCert(unknown.Certificate())
	tc := tls.Client(conn, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the approved tunnel: %v (want the host's own certificate: passthrough)", err)
	}
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
	got, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(got.Body)
	if !strings.Contains(string(b), "unknown host; auth=") || strings.Contains(string(b), secretValue) || strings.Contains(string(b), f.token) {
		t.Errorf("through the approved tunnel = %q, want the host's own answer with no secret or token", b)
	}
	if resp, _, _ := connect(t, f, "127.0.0.1:1", basic(f.token)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT to another unknown host = %d, want 403", resp.StatusCode)
	}
}

// TestProxy_ApprovedHostNeverCarriesASecret: an approval of a host on
// which a secret of the box is pinned (on another port) opens no
// tunnel: passthrough could not keep what the broker wrote there out.
func TestProxy_ApprovedHostNeverCarriesASecret(t *testing.T) {
	f := newFixture(t)
	if err := f.b.Server.Approvals.SetAsk(t.Context(), "shop", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	other := "example.com:8443" // API is pinned to example.com on another port
	resp, body, _ := connect(t, f, other, basic(f.token))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT %s = %d %s, want 403", other, resp.StatusCode, body)
	}
	ps, _ := f.b.Server.Approvals.List(t.Context(), "shop", store.ProposalPending)
	if len(ps) != 1 {
		t.Fatalf("pending = %+v, want one", ps)
	}
	if _, err := f.b.Server.Approvals.Approve(t.Context(), ps[0].ID, 0, true, "test"); err != nil {
		t.Fatal(err)
	}
	resp, body, _ = connect(t, f, other, basic(f.token))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "passthrough") {
		t.Errorf("CONNECT %s after approval = %d %s, want 403 naming passthrough", other, resp.StatusCode, body)
	}
}

// TestProxy_RuleAskedThenApproved: inside an intercepted tunnel, a
// request outside API's rules in ask mode opens a proposal its refusal
// names; approved, the same request reaches the host.
func TestProxy_RuleAskedThenApproved(t *testing.T) {
	f := newFixture(t)
	f.b.SetSecretRules("shop", "API", []string{"GET /repos/acme/**"}, "")
	if err := f.b.Server.Approvals.SetAsk(t.Context(), "shop", approval.SecretScope("API"), true); err != nil {
		t.Fatal(err)
	}
	c := f.client(t, f.token, f.caPool, false)
	post := func() (int, string) {
		req, err := http.NewRequest("POST", "https://"+f.host+"/repos/acme/app/issues", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		code, body := send(t, c, req)
		return code, string(body)
	}
	code, body := post()
	if code != http.StatusForbidden || strings.Contains(f.up.all(), "POST /repos/acme/app/issues") {
		t.Fatalf("POST outside the rules = %d %s, want 403 before the host", code, body)
	}
	ps, _ := f.b.Server.Approvals.List(t.Context(), "shop", store.ProposalPending)
	if len(ps) != 1 || ps[0].Secret != "API" || ps[0].Path != "/repos/acme/app/issues" {
		t.Fatalf("pending = %+v, want API's POST /repos/acme/app/issues", ps)
	}
	if _, msg := brokertest.Refusal([]byte(body)); !strings.Contains(msg, ps[0].ID) {
		t.Errorf("refusal = %q, want it to name %s", msg, ps[0].ID)
	}
	if _, err := f.b.Server.Approvals.Approve(t.Context(), ps[0].ID, time.Hour, false, "test"); err != nil {
		t.Fatal(err)
	}
	if code, body := post(); code != http.StatusOK || !strings.Contains(f.up.all(), "POST /repos/acme/app/issues") {
		t.Errorf("the same POST after approval = %d %s, want 200 at the host", code, body)
	}
}
