package egressproxy_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/store"
)

// TestProxy_TrailingDotHostIsTheSecretsHost: "example.com." is the same
// host as example.com, where the box's secret API is pinned. A CONNECT
// to it on another port, asked about and approved as an unknown host,
// must still open no passthrough tunnel: the broker could not keep what
// it wrote to example.com for the box out of one. Nor may the dot, or
// upper case, make the secret's own host:port an unknown host.
func TestProxy_TrailingDotHostIsTheSecretsHost(t *testing.T) {
	f := newFixture(t)
	if err := f.b.Server.Approvals.SetAsk(t.Context(), "shop", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(f.host)
	for _, other := range []string{"example.com.:8443", "EXAMPLE.COM.:8443"} {
		resp, body, _ := connect(t, f, other, basic(f.token))
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT %s = %d %s, want 403", other, resp.StatusCode, body)
		}
		ps, _ := f.b.Server.Approvals.List(t.Context(), "shop", store.ProposalPending)
		for _, p := range ps {
			if _, err := f.b.Server.Approvals.Approve(t.Context(), p.ID, 0, true, "test"); err != nil {
				t.Fatal(err)
			}
		}
		resp, body, _ = connect(t, f, other, basic(f.token))
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "passthrough") {
			t.Errorf("CONNECT %s after approval = %d %s, want 403 naming passthrough", other, resp.StatusCode, body)
		}
	}
	for _, same := range []string{"example.com.:" + port, "Example.COM.:" + port} {
		resp, body, _ := connect(t, f, same, basic(f.token))
		if resp.StatusCode != http.StatusOK {
			t.Errorf("CONNECT %s = %d %s, want 200: the secret's own host", same, resp.StatusCode, body)
		}
	}
	if n := f.dials.count("example.com.:8443") + f.dials.count("example.com:8443"); n != 0 {
		t.Errorf("the proxy dialled example.com:8443 %d times, want none", n)
	}
}

// TestProxy_TunnelRequestCannotNameAnotherHost: inside a tunnel opened
// to the secret's host, a request in absolute form for the passthrough
// host (its Host the tunnel's), with userinfo, or over HTTP/2 with
// another :authority, is refused before any host is reached; the value
// goes nowhere but the secret's host.
func TestProxy_TunnelRequestCannotNameAnotherHost(t *testing.T) {
	f := newFixture(t)
	heads := []string{
		"GET https://" + f.passHost + "/v1/x HTTP/1.1\r\nHost: " + f.host + "\r\n",
		"GET https://" + f.host + "@" + f.passHost + "/v1/x HTTP/1.1\r\nHost: " + f.host + "\r\n",
		"GET https://x@" + f.passHost + "/v1/x HTTP/1.1\r\nHost: " + f.passHost + "\r\n",
		"GET /v1/x HTTP/1.1\r\nHost: " + f.host + "@" + f.passHost + "\r\n",
		"GET //" + f.passHost + "/v1/x HTTP/1.1\r\nHost: " + f.host + "\r\n",
	}
	for _, head := range heads {
		_, _, c := connect(t, f, f.host, basic(f.token))
		tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: f.caPool, NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		io.WriteString(tc, head+"Authorization: Bearer "+f.token+"\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatalf("%q: %v", head, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%q = %d", head, resp.StatusCode)
		if strings.Contains(string(body), secretValue) || strings.Contains(string(body), "passthrough host, its own") {
			t.Errorf("%q: the answer holds the value, or comes from the passthrough host: %s", head, body)
		}
		if resp.StatusCode == http.StatusOK && !strings.Contains(f.up.all(), "/v1/x") {
			t.Errorf("%q = 200, but not from the secret's host", head)
		}
	}
	if strings.Contains(f.up.all(), f.token) {
		t.Errorf("the secret's host received the box's token")
	}
}

// TestProxy_H2StreamCannotNameAnotherHost: on one HTTP/2 connection in a
// tunnel opened to the secret's host, a client coalesces a stream for
// another host (its :authority the passthrough host's, or the tunnel's
// host with a host header naming the other), beside a stream for the
// tunnel's own host. Each stream is judged by its own authority: the
// other host's is refused, nothing reaches it, and the value goes to the
// secret's host alone.
func TestProxy_H2StreamCannotNameAnotherHost(t *testing.T) {
	f := newFixture(t)
	var protos http.Protocols
	protos.SetHTTP2(true)
	via := *f.proxy
	via.User = url.UserPassword("box", f.token)
	tr := &http.Transport{Proxy: http.ProxyURL(&via), Protocols: &protos, TLSClientConfig: &tls.Config{ServerName: "example.com", RootCAs: f.caPool}}
	t.Cleanup(tr.CloseIdleConnections)
	cc, err := tr.NewClientConn(t.Context(), "https", f.host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	tests := []struct {
		name, authority, host string
		ok                    bool
	}{
		{"the tunnel's host", f.host, "", true},
		{"another :authority", f.passHost, "", false},
		{"a host header beside the authority", f.host, f.passHost, true},
		{"the tunnel's host again", f.host, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "https://"+tt.authority+"/v1/x", nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			if tt.host != "" {
				req.Header["Host"] = []string{tt.host}
			}
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("GET :authority %s went as %s, want HTTP/2", tt.authority, resp.Proto)
			}
			if strings.Contains(string(body), secretValue) || strings.Contains(string(body), "passthrough host, its own") {
				t.Errorf("GET :authority %s = %d, the answer holds the value or comes from the passthrough host: %s", tt.authority, resp.StatusCode, body)
			}
			if got := resp.StatusCode == http.StatusOK; got != tt.ok {
				t.Errorf("GET :authority %s (host %q) = %d %s, want 200: %v", tt.authority, tt.host, resp.StatusCode, body, tt.ok)
			}
		})
	}
	if strings.Contains(f.up.all(), f.token) {
		t.Errorf("the secret's host received the box's token")
	}
	if n := f.dials.count(f.passHost); n != 0 {
		t.Errorf("the proxy dialled the passthrough host %d times, want none", n)
	}
}
