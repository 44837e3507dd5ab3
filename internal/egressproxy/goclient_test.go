package egressproxy_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestProxy_GoClient_HostGetsValueBoxNever: Go's http.Client with Proxy
// set, over HTTP/1.1 and HTTP/2 inside the tunnel. The secret's host
// receives the value, never the token; the box's answer, although the
// host echoes every header it got, carries the token back, never the
// value.
func TestProxy_GoClient_HostGetsValueBoxNever(t *testing.T) {
	f := newFixture(t)
	for _, h2 := range []bool{false, true} {
		c := f.client(t, f.token, f.caPool, h2)
		req, _ := http.NewRequest("POST", "https://"+f.host+"/v1/echo?key="+f.token, strings.NewReader(`{"k":"`+f.token+`"}`))
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("h2=%v: Do = %v", h2, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("h2=%v: status %d %s", h2, resp.StatusCode, body)
		}
		if wantProto := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != wantProto {
			t.Errorf("h2=%v: the tunnel spoke HTTP/%d, want HTTP/%d", h2, resp.ProtoMajor, wantProto)
		}
		seen := f.up.all()
		if !strings.Contains(seen, "Authorization: Bearer "+secretValue) || !strings.Contains(seen, "key="+secretValue) {
			t.Errorf("h2=%v: the host did not receive the value in the header and query:\n%s", h2, seen)
		}
		if strings.Contains(seen, f.token) {
			t.Errorf("h2=%v: the host received the box's token:\n%s", h2, seen)
		}
		answer := string(body) + headerText(resp.Header)
		if strings.Contains(answer, secretValue) {
			t.Errorf("h2=%v: the box's answer carries the value:\n%s", h2, answer)
		}
		if !strings.Contains(answer, "Bearer "+f.token) {
			t.Errorf("h2=%v: the echoed header does not carry the box's token back:\n%s", h2, answer)
		}
	}
}

func headerText(h http.Header) string {
	var b strings.Builder
	h.Write(&b)
	return b.String()
}

// TestProxy_GoClient_Refusals: an undeclared host gets 403 naming
// egress, a wrong or missing token 407, a paused box 403, and a
// passthrough host is tunnelled untouched (the client sees its own
// certificate, not one from the broker's CA).
func TestProxy_GoClient_Refusals(t *testing.T) {
	f := newFixture(t)
	get := func(c *http.Client, u string) (*http.Response, string, error) {
		resp, err := c.Get(u)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}
	// Undeclared: a host no secret is pinned to, and the secret's host at another port.
	for _, u := range []string{"https://api.github.com/", "https://example.com:1/", "https://127.0.0.1:" + strings.Split(f.host, ":")[1] + "/"} {
		if _, _, err := get(f.client(t, f.token, f.caPool, false), u); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("GET %s = %v, want the CONNECT refused 403", u, err)
		}
	}
	// Wrong token.
	other, _ := strings.CutPrefix(f.token, "bbx_")
	wrong := "bbx_" + strings.Repeat("A", len(other))
	if _, _, err := get(f.client(t, wrong, f.caPool, false), "https://"+f.host+"/"); err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
		t.Errorf("GET with a wrong token = %v, want 407", err)
	}
	// Passthrough: trusted only through the host's own certificate.
	roots := x509.NewCertPool()
	roots.AddCert(f.passCert)
	resp, body, err := get(f.client(t, f.token, roots, false), "https://"+f.passHost+"/")
	if err != nil {
		t.Fatalf("passthrough GET = %v", err)
	}
	if !resp.TLS.PeerCertificates[0].Equal(f.passCert) || !strings.Contains(body, "its own certificate") {
		t.Errorf("passthrough: the client saw %v, want the host's own certificate", resp.TLS.PeerCertificates[0].Subject)
	}
	// Paused.
	ctx := t.Context()
	box, _ := f.b.Server.Store.Box(ctx, "shop")
	box.Paused = true
	if err := f.b.Server.Store.UpdateBox(ctx, box); err != nil {
		t.Fatal(err)
	}
	f.b.Server.Cache.Drop(store.ChangeBox, "shop")
	f.b.Sync()
	if _, _, err := get(f.client(t, f.token, f.caPool, false), "https://"+f.host+"/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("GET by a paused box = %v, want 403", err)
	}
}

// connect sends a raw CONNECT to the proxy with auth (a whole
// Proxy-Authorization value, or none) and returns the answer.
func connect(t *testing.T, f *fixture, authority, auth string) (*http.Response, string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", f.proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", authority, err)
	}
	var body []byte
	if resp.StatusCode != 200 {
		body, _ = io.ReadAll(resp.Body)
	}
	return resp, string(body), &readerConn{Conn: c, r: br}
}

type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func basic(tok string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("box:"+tok))
}

// TestProxy_ConnectRefusals: the refusal's status, header and message
// for each case a CONNECT is refused, in the protocol's shape.
func TestProxy_ConnectRefusals(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddBox("other")
	f.b.Report(other, brokertest.Entry("inference", "agent"))
	f.b.SetSecret("other", "GH", "https://api.github.com", "ghp_value_of_other_0123")
	f.b.Sync()
	tests := []struct {
		name, authority, auth string
		status                int
		want                  []string
	}{
		{"no token", f.host, "", 407, []string{"authentication_error", "Proxy-Authorization"}},
		{"unknown token", f.host, "Bearer bbx_" + strings.Repeat("x", 43), 407, []string{"no box's token"}},
		{"bearer ok but no secret pinned", "api.github.com:443", "Bearer " + f.token, 403, []string{"permission_error", "egress", "No egress secret", "https://api.github.com:443"}},
		{"pinned but undeclared", "api.github.com:443", basic(other), 403, []string{"egress", "GH", "chant.workspace.json"}},
		{"other port", "example.com:8443", basic(f.token), 403, []string{"No egress secret"}},
		{"IP literal", "127.0.0.1:" + strings.Split(f.host, ":")[1], basic(f.token), 403, []string{"No egress secret"}},
		{"no port", "example.com", basic(f.token), 400, []string{"host:port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, _ := connect(t, f, tt.authority, tt.auth)
			if resp.StatusCode != tt.status {
				t.Fatalf("CONNECT %s = %d %s, want %d", tt.authority, resp.StatusCode, body, tt.status)
			}
			typ, msg := brokertest.Refusal([]byte(body))
			for _, w := range tt.want {
				if !strings.Contains(typ+" "+msg, w) {
					t.Errorf("CONNECT %s: refusal %s %q does not say %q", tt.authority, typ, msg, w)
				}
			}
			if tt.status == 407 && !strings.HasPrefix(resp.Header.Get("Proxy-Authenticate"), "Basic ") {
				t.Errorf("407 without Proxy-Authenticate: Basic: %q", resp.Header.Get("Proxy-Authenticate"))
			}
			if strings.Contains(body, f.token) || strings.Contains(body, secretValue) {
				t.Errorf("the refusal repeats the token or the value: %s", body)
			}
		})
	}
}

// TestProxy_TunnelHostMismatchAndTLS: inside an allowed tunnel, a
// request for another Host is refused and never reaches a host; the
// leaf is the CONNECT host's, from the broker's CA, for at most 24
// hours; TLS below 1.2 is refused.
func TestProxy_TunnelHostMismatchAndTLS(t *testing.T) {
	f := newFixture(t)
	_, _, c := connect(t, f, f.host, basic(f.token))
	tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: f.caPool, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	leaf := tc.ConnectionState().PeerCertificates[0]
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life > 24*time.Hour {
		t.Errorf("leaf lifetime %v, want at most 24h", life)
	}
	if v := tc.ConnectionState().Version; v < tls.VersionTLS12 {
		t.Errorf("TLS version %x, want 1.2 or later", v)
	}
	io.WriteString(tc, "GET /v1/x HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer "+f.token+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || strings.Contains(string(body), "evil.example") || !strings.Contains(string(body), f.host) {
		t.Errorf("request for another Host = %d %s, want 403 naming the tunnel's host, not the one sent", resp.StatusCode, body)
	}
	if seen := f.up.all(); seen != "" {
		t.Errorf("the host received a request: %s", seen)
	}

	_, _, c2 := connect(t, f, f.host, basic(f.token))
	old := tls.Client(c2, &tls.Config{ServerName: "example.com", RootCAs: f.caPool, MaxVersion: tls.VersionTLS11})
	if err := old.Handshake(); err == nil {
		t.Errorf("a TLS 1.1 handshake succeeded, want it refused")
	}
}
