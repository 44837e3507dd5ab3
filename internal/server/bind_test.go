package server_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// The tests of a box's token bound to where its box runs (box add
// --from, box bind, serve --trusted-proxy) and of its lifetimes (box add
// --ttl, box rotate --grace). "Elsewhere" is another loopback address:
// the broker listens on 127.0.0.1, and a client dialling from 127.0.0.2
// reaches it from an address the box's token is not bound to.

// clientFrom is an HTTP client whose connections leave from ip.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = d.DialContext
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// sendFrom sends a request with the box's token (none when tok is empty)
// and headers h through c, and returns its status and body. A body is
// sent as JSON unless h names its Content-Type.
func sendFrom(t *testing.T, c *http.Client, method, url, tok, body string, h http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// outside reports whether body is the refusal of a token used from
// outside its box's addresses.
func outside(body []byte) bool {
	_, msg := brokertest.Refusal(body)
	return strings.Contains(msg, "outside its box's addresses")
}

// TestBox_TokenFromOutsideItsAddressesIsRefused: a box's token bound to
// 127.0.0.1 (where the box runs) is served from there, and refused from
// 127.0.0.2 on every route family: inference and decide with a 403 (the
// specification never allows a 401 there), egress, and the declaration
// route (whose report is then not kept). Each refusal is recorded with
// its own reason, counted in metrics, and names no token.
func TestBox_TokenFromOutsideItsAddressesIsRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host ok") }))
	t.Cleanup(host.Close)
	tok := b.AddBox("shop")
	b.SetCredential("anthropic", "sk-ant-api03-bind-credential")
	b.SetSecret("shop", "GITHUB", host.URL, "ghp_bindvalue0123456789abcdef0123456789")
	b.Report(tok, brokertest.Entry("inference", "agent", "decide"), brokertest.Entry("egress", "GITHUB"))
	if err := b.Server.Store.BindBox(ctx, "shop", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	home, away := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	report := `{"capabilities":[{"name":"inference","broker":"lobby","scope":[]}]}`
	tests := []struct {
		name, method, path, body string
		homeStatus               int // 0: any but a refusal for the address
	}{
		{"inference", "GET", "/llm/anthropic/v1/models", "", http.StatusOK},
		{"decide", "POST", "/decide/v1/systemone", `{}`, 0},
		{"egress", "GET", "/egress/GITHUB/repos/shop", "", http.StatusOK},
		{"declaration", "POST", protocol.RouteDeclaration, report, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := sendFrom(t, away, tt.method, b.URL+tt.path, tok, tt.body, nil)
			if status != http.StatusForbidden || !outside(body) {
				t.Errorf("%s %s from 127.0.0.2 = %d %s, want 403 saying the token was used from outside its box's addresses", tt.method, tt.path, status, body)
			}
			if typ, _ := brokertest.Refusal(body); typ != protocol.TypePermission {
				t.Errorf("%s %s from 127.0.0.2: refusal type %q, want %q", tt.method, tt.path, typ, protocol.TypePermission)
			}
			if tt.name == "declaration" {
				return // from home it would replace the report the others need
			}
			status, body = sendFrom(t, home, tt.method, b.URL+tt.path, tok, tt.body, nil)
			if outside(body) || tt.homeStatus != 0 && status != tt.homeStatus {
				t.Errorf("%s %s from 127.0.0.1 = %d %s, want %d", tt.method, tt.path, status, body, tt.homeStatus)
			}
		})
	}
	// The refused report was not kept: the box is still served inference.
	if status, body := sendFrom(t, home, "GET", b.URL+"/llm/anthropic/v1/models", tok, "", nil); status != http.StatusOK {
		t.Errorf("after the refused report: models from home = %d %s, want 200", status, body)
	}

	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "shop", RefusalsOnly: true, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Reason == capability.ReasonOutside {
			n++
			if strings.Contains(e.Message, tok) || !strings.Contains(e.Message, "127.0.0.2") {
				t.Errorf("audit row %+v: want the address it came from, and no token", e)
			}
		}
	}
	if n != len(tests) {
		t.Errorf("audit rows of reason %q = %d, want %d: %+v", capability.ReasonOutside, n, len(tests), entries)
	}
	text := scrape(t, b)
	series := `boxbroker_requests_total{capability="inference",reason="outside its box",route="/llm/anthropic/v1/models",status="403"}`
	if got := metric(text, series); got != "1" {
		t.Errorf("metric %s = %q, want 1", series, got)
	}
}

// TestBox_ForwardedForBelievedOnlyFromATrustedProxy: X-Forwarded-For says
// where a request came from only when the peer is a trusted proxy
// (--trusted-proxy), and then its right-most address that is no trusted
// proxy's is the source. A box outside its addresses that writes the
// address it is bound to into X-Forwarded-For itself is refused.
func TestBox_ForwardedForBelievedOnlyFromATrustedProxy(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}})
	ctx := context.Background()
	tok := b.AddBox("shop")
	b.SetCredential("anthropic", "sk-ant-api03-bind-credential")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	if err := b.Server.Store.BindBox(ctx, "shop", []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	proxy, box := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	tests := []struct {
		name   string
		c      *http.Client
		xff    []string
		served bool
	}{
		{"from the trusted proxy, for the box's address", proxy, []string{"198.51.100.7"}, true},
		{"from the trusted proxy, two headers", proxy, []string{"203.0.113.50", "198.51.100.7, 127.0.0.1"}, true},
		{"from the trusted proxy, for another address", proxy, []string{"198.51.100.7, 203.0.113.9"}, false},
		{"from the trusted proxy, with none", proxy, nil, false},
		{"spoofed by an untrusted peer", box, []string{"198.51.100.7"}, false},
		{"spoofed by an untrusted peer naming the proxy", box, []string{"198.51.100.7, 127.0.0.1"}, false},
		{"not an address", proxy, []string{"198.51.100.7, nonsense"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := sendFrom(t, tt.c, "GET", b.URL+"/llm/anthropic/v1/models", tok, "", http.Header{"X-Forwarded-For": tt.xff})
			if tt.served && status != http.StatusOK || !tt.served && (status != http.StatusForbidden || !outside(body)) {
				t.Errorf("models with X-Forwarded-For %q = %d %s, want served: %v", tt.xff, status, body, tt.served)
			}
		})
	}
}

// clock is a test's clock for box tokens: the time now, moved on by
// what the test adds.
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time            { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) advance(d time.Duration)   { c.ahead.Add(int64(d)) }
func (c *clock) options(o *server.Options) { o.TokenNow = c.now }

// TestBox_TokenPastItsTTLIsRefused: a box added with a TTL through the
// admin API is served until its token expires, and refused after with a
// 403 saying so and how to rotate; the rotated token is served.
func TestBox_TokenPastItsTTLIsRefused(t *testing.T) {
	var clk clock
	b := brokertest.New(t, brokertest.Options{ServerOptions: clk.options})
	b.SetCredential("anthropic", "sk-ant-api03-ttl-credential")
	resp := b.Admin("POST", "/api/boxes", b.AdminToken, operator.NewBox{Name: "shop", TTL: "1h"})
	var bt operator.BoxToken
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(resp.Body, &bt) != nil {
		t.Fatalf("POST /api/boxes with a ttl = %d %s", resp.StatusCode, resp.Body)
	}
	if bt.Box.ExpiresAt == nil || bt.Box.TokenTTL == nil || *bt.Box.TokenTTL != "1h0m0s" {
		t.Errorf("the new box = %+v, want its TTL and expiry", bt.Box)
	}
	b.Report(bt.Token, brokertest.Entry("inference", "agent"))
	if r := models(b, bt.Token); r.StatusCode != http.StatusOK {
		t.Fatalf("models before the expiry = %d %s, want 200", r.StatusCode, r.Body)
	}
	clk.advance(time.Hour + time.Second)
	r := models(b, bt.Token)
	if _, msg := brokertest.Refusal(r.Body); r.StatusCode != http.StatusForbidden || !strings.Contains(msg, "expired") || !strings.Contains(msg, "box rotate") {
		t.Errorf("models after the expiry = %d %q, want 403 saying it expired and how to rotate", r.StatusCode, msg)
	}
	clk.ahead.Store(0)
	resp = b.Admin("POST", "/api/boxes/shop/token", b.AdminToken, nil)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(resp.Body, &bt) != nil {
		t.Fatalf("rotate = %d %s", resp.StatusCode, resp.Body)
	}
	if r := models(b, bt.Token); r.StatusCode != http.StatusOK {
		t.Errorf("models with the rotated token = %d %s, want 200", r.StatusCode, r.Body)
	}
	clk.advance(time.Hour + time.Second)
	if r := models(b, bt.Token); r.StatusCode != http.StatusForbidden {
		t.Errorf("the rotated token an hour on = %d %s, want 403: it is given the box's TTL too", r.StatusCode, r.Body)
	}
}

// TestBox_RotateGraceKeepsTheOldTokenUntilItEnds: after box rotate
// --grace 1h both tokens are served; once the grace ends the old one is
// refused, saying so, and the new one is still served.
func TestBox_RotateGraceKeepsTheOldTokenUntilItEnds(t *testing.T) {
	var clk clock
	b := brokertest.New(t, brokertest.Options{ServerOptions: clk.options})
	b.SetCredential("anthropic", "sk-ant-api03-grace-credential")
	old := b.AddBox("shop")
	b.Report(old, brokertest.Entry("inference", "agent"))
	resp := b.Admin("POST", "/api/boxes/shop/token", b.AdminToken, operator.TokenRotation{Grace: "1h"})
	var bt operator.BoxToken
	if resp.StatusCode != http.StatusOK || json.Unmarshal(resp.Body, &bt) != nil {
		t.Fatalf("rotate with a grace = %d %s", resp.StatusCode, resp.Body)
	}
	if bt.Box.OldTokenUntil == nil {
		t.Errorf("the rotated box = %+v, want when the old token stops", bt.Box)
	}
	for _, tok := range []string{old, bt.Token} {
		if r := models(b, tok); r.StatusCode != http.StatusOK {
			t.Errorf("during the grace: models = %d %s, want 200 for both tokens", r.StatusCode, r.Body)
		}
	}
	clk.advance(time.Hour + time.Second)
	r := models(b, old)
	if _, msg := brokertest.Refusal(r.Body); r.StatusCode != http.StatusForbidden || !strings.Contains(msg, "grace") {
		t.Errorf("the old token after the grace = %d %q, want 403 saying its grace ended", r.StatusCode, msg)
	}
	if r := models(b, bt.Token); r.StatusCode != http.StatusOK {
		t.Errorf("the new token after the grace = %d %s, want 200", r.StatusCode, r.Body)
	}
	// A rotation with no grace forgets the old token at once.
	prev := bt.Token
	if resp := b.Admin("POST", "/api/boxes/shop/token", b.AdminToken, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("rotate = %d %s", resp.StatusCode, resp.Body)
	}
	if r := models(b, prev); r.StatusCode != http.StatusForbidden || bytes.Contains(r.Body, []byte("grace")) {
		t.Errorf("the token rotated with no grace = %d %s, want 403 as no box's token", r.StatusCode, r.Body)
	}
}

// gitHost is a git host stand-in: it keeps what a push sends
// (receive-pack), and serves a pushed file back raw, inflated from the
// packfile, as a host's raw-file route does.
type gitHost struct {
	value string // the credential it takes
	mu    sync.Mutex
	pack  []byte
}

func (g *gitHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pass, ok := r.BasicAuth(); !ok || pass != g.value {
		http.Error(w, "bad credentials", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/git-receive-pack"):
		body, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.pack = body
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
		io.WriteString(w, "000eunpack ok\n0000")
	case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/raw/.env"):
		g.mu.Lock()
		pack := g.pack
		g.mu.Unlock()
		i := bytes.Index(pack, []byte("PACK"))
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		zr, err := zlib.NewReader(bytes.NewReader(pack[i+4:]))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.Copy(w, zr)
	default:
		http.NotFound(w, r)
	}
}

// TestEgress_TokenPushedInAPackfileIsRecordedAndWorthNothingElsewhere is
// issue 40's item 2: a box commits its own .env (GITHUB_KEY=<its token>)
// and pushes it; the packfile is deflated, so no scan of the request
// sees the token, and the git host keeps it. When the host later serves
// the file back, the broker records that the host holds the box's token
// (an audit row of its own reason naming the host, a WARN line naming
// box and host, never the token); and whoever reads the token there
// cannot use it from anywhere but the box's own address.
func TestEgress_TokenPushedInAPackfileIsRecordedAndWorthNothingElsewhere(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs})
	ctx := context.Background()
	const value = "ghp_gitvalue0123456789abcdefghijklmnopqr"
	git := &gitHost{value: value}
	host := httptest.NewServer(git)
	t.Cleanup(host.Close)
	tok := b.AddBox("shop")
	b.SetCredential("anthropic", "sk-ant-api03-git-credential")
	b.SetSecret("shop", "GITHUB", host.URL, value)
	b.Report(tok, brokertest.Entry("inference", "agent"), brokertest.Entry("egress", "GITHUB"))
	if err := b.Server.Store.BindBox(ctx, "shop", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	home, away := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	basic := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok))}}

	// The push: its .env deflated in the packfile.
	var pack bytes.Buffer
	pack.WriteString("0000PACK")
	zw := zlib.NewWriter(&pack)
	io.WriteString(zw, "GITHUB_KEY="+tok+"\nDEBUG=1\n")
	zw.Close()
	push := basic.Clone()
	push.Set("Content-Type", "application/x-git-receive-pack-request")
	status, body := sendFrom(t, home, "POST", b.URL+"/egress/GITHUB/owner/repo.git/git-receive-pack", "", pack.String(), push)
	if status != http.StatusOK {
		t.Fatalf("push = %d %s, want 200", status, body)
	}
	// The host serves the file back: it holds the box's token.
	status, body = sendFrom(t, home, "GET", b.URL+"/egress/GITHUB/owner/repo/raw/.env", "", "", basic)
	if status != http.StatusOK || !bytes.Contains(body, []byte("GITHUB_KEY=")) {
		t.Fatalf("the .env served back = %d %s, want 200 and the file", status, body)
	}

	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "shop", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	hostName := strings.TrimPrefix(host.URL, "http://")
	var seen []store.AuditEntry
	for _, e := range entries {
		if strings.Contains(fmt.Sprintf("%+v", e), tok) {
			t.Errorf("audit row holds the box's token: %+v", e)
		}
		if e.Reason == capability.ReasonTokenSeen {
			seen = append(seen, e)
		}
	}
	if len(seen) != 1 || !strings.Contains(seen[0].Message, hostName) || seen[0].Route != "/egress/GITHUB" {
		t.Errorf("audit rows of reason %q = %+v, want one naming the host %s", capability.ReasonTokenSeen, seen, hostName)
	}
	var warned bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, tok) {
			t.Errorf("a log line holds the box's token: %s", line)
		}
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "box's own token") && strings.Contains(line, `"box":"shop"`) && strings.Contains(line, hostName) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no WARN line names the box and the host holding its token:\n%s", logs.String())
	}

	// Whoever read the token at the host uses it from elsewhere.
	for _, path := range []string{"/llm/anthropic/v1/models", "/egress/GITHUB/owner/repo/raw/.env"} {
		if status, body := sendFrom(t, away, "GET", b.URL+path, tok, "", nil); status != http.StatusForbidden || !outside(body) {
			t.Errorf("the stolen token from 127.0.0.2 on %s = %d %s, want 403 as used from outside its box", path, status, body)
		}
	}
}
