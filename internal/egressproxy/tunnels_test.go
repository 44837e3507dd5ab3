package egressproxy_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestProxy_PassthroughToASecretsHostIsRefused: a passthrough tunnel to
// a host where a secret of the box is pinned would carry back, unread,
// whatever the broker wrote there with the secret's value; its CONNECT
// is refused, naming the host and why, and the host is never dialled.
// A box with no secret there is tunnelled as before.
func TestProxy_PassthroughToASecretsHostIsRefused(t *testing.T) {
	tests := []struct {
		name string
		host func(f *fixture) string // the secret's host
	}{
		{"same host and port", func(f *fixture) string { return "https://" + f.passHost }},
		{"same host, another port", func(f *fixture) string { return "https://127.0.0.1:1" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.b.SetSecret("shop", "PASS", tt.host(f), "pass_value_0123456789")
			f.b.Sync()
			resp, body, _ := connect(t, f, f.passHost, basic(f.token))
			if resp.StatusCode != 403 || !strings.Contains(body, "permission_error") || !strings.Contains(body, f.passHost) || !strings.Contains(body, "PASS") {
				t.Errorf("CONNECT %s with a secret pinned to its host = %d %s, want 403 naming the host and the secret", f.passHost, resp.StatusCode, body)
			}
			if n := f.dials.count(f.passHost); n != 0 {
				t.Errorf("the passthrough host was dialled %d times, want none", n)
			}

			other := f.b.AddBox("other")
			f.b.Report(other, brokertest.Entry("egress"))
			if resp, body, _ := connect(t, f, f.passHost, basic(other)); resp.StatusCode != 200 {
				t.Errorf("CONNECT %s for a box with no secret there = %d %s, want 200", f.passHost, resp.StatusCode, body)
			}
		})
	}
}

// TestProxy_PassthroughClosesWhenASecretIsPinnedThere: an open
// passthrough tunnel is closed once a secret of its box is pinned to its
// host, before the box could have the broker write the value there.
func TestProxy_PassthroughClosesWhenASecretIsPinnedThere(t *testing.T) {
	f := newFixture(t)
	pass := openPassthrough(t, f)
	inter := openIntercepted(t, f)
	f.b.SetSecret("shop", "PASS", "https://"+f.passHost, "pass_value_0123456789")
	if err := waitClosed(pass); err != nil {
		t.Errorf("the passthrough tunnel after a secret was pinned to its host: %v, want it closed by the proxy", err)
	}
	if err := interGet(f, inter); err != nil {
		t.Errorf("the intercepted tunnel to another host: %v, want it open", err)
	}
}

// TestProxy_UnreportedBoxIsNotTunnelled: a box that never reported, or
// whose report declares no egress, gets no passthrough tunnel.
func TestProxy_UnreportedBoxIsNotTunnelled(t *testing.T) {
	f := newFixture(t)
	quiet := f.b.AddBox("quiet")
	noEgress := f.b.AddBox("noegress")
	f.b.Report(noEgress, brokertest.Entry("inference", "agent"))
	tests := []struct {
		name, token, want string
	}{
		{"never reported", quiet, "no declaration"},
		{"no egress declared", noEgress, "declares no egress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, _ := connect(t, f, f.passHost, basic(tt.token))
			if resp.StatusCode != 403 || !strings.Contains(body, tt.want) {
				t.Errorf("CONNECT %s = %d %s, want 403 (%s)", f.passHost, resp.StatusCode, body, tt.want)
			}
		})
	}
	if n := f.dials.count(f.passHost); n != 0 {
		t.Errorf("the passthrough host was dialled %d times, want none", n)
	}
}

// TestProxy_TunnelsCloseWhenTheBoxChanges: a tunnel is not judged once,
// at CONNECT: when its box is paused, its token rotated, the box
// removed, or its report drops egress, the proxy closes the box's open
// tunnels, passthrough and intercepted.
func TestProxy_TunnelsCloseWhenTheBoxChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, f *fixture)
	}{
		{"pause", func(t *testing.T, f *fixture) {
			st := f.b.Server.Store
			b, err := st.Box(t.Context(), "shop")
			if err != nil {
				t.Fatal(err)
			}
			b.Paused = true
			if err := st.UpdateBox(t.Context(), b); err != nil {
				t.Fatal(err)
			}
		}},
		{"rotate", func(t *testing.T, f *fixture) {
			tok, _ := token.NewBox()
			if err := f.b.Server.Store.RotateToken(t.Context(), "shop", token.Hash(tok)); err != nil {
				t.Fatal(err)
			}
		}},
		{"bind elsewhere", func(t *testing.T, f *fixture) {
			if err := f.b.Server.Store.BindBox(t.Context(), "shop", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}); err != nil {
				t.Fatal(err)
			}
		}},
		{"remove", func(t *testing.T, f *fixture) {
			if err := f.b.Server.Store.DeleteBox(t.Context(), "shop"); err != nil {
				t.Fatal(err)
			}
		}},
		{"report drops egress", func(t *testing.T, f *fixture) {
			f.b.Report(f.token, brokertest.Entry("inference", "agent"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			pass := openPassthrough(t, f)
			inter := openIntercepted(t, f)
			tt.change(t, f)
			for name, c := range map[string]net.Conn{"passthrough": pass, "intercepted": inter} {
				if err := waitClosed(c); err != nil {
					t.Errorf("%s tunnel after %s: %v, want it closed by the proxy", name, tt.name, err)
				}
			}
			if tt.name == "report drops egress" {
				if seen := f.up.all(); strings.Count(seen, "GET /v1/open") != 1 {
					t.Errorf("the secret's host saw:\n%s\nwant the one request made before the change", seen)
				}
			}
		})
	}
}

// TestProxy_TunnelsStayOpenWhileTheBoxIsUnchanged: the re-check closes
// nothing while the box may still reach its hosts.
func TestProxy_TunnelsStayOpenWhileTheBoxIsUnchanged(t *testing.T) {
	f := newFixture(t)
	pass := openPassthrough(t, f)
	inter := openIntercepted(t, f)
	// Another box's change closes nothing of this one's.
	other := f.b.AddBox("other")
	f.b.Report(other, brokertest.Entry("egress"))
	opened := openPassthroughFor(t, f, other)
	if err := f.b.Server.Store.DeleteBox(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	if err := waitClosed(opened); err != nil {
		t.Fatalf("the removed box's tunnel: %v", err)
	}
	// The removed box's tunnel closed after a re-check, which kept these.
	if err := passGet(pass); err != nil {
		t.Errorf("the passthrough tunnel of an unchanged box: %v", err)
	}
	if err := interGet(f, inter); err != nil {
		t.Errorf("the intercepted tunnel of an unchanged box: %v", err)
	}
}

// TestProxy_TunnelHostRefusalQuotesNothingTheBoxSent: a request in a
// tunnel whose Host is not the tunnel's is refused naming the tunnel's
// host only, so a token sent as the Host is neither shown back nor kept
// in the audit log.
func TestProxy_TunnelHostRefusalQuotesNothingTheBoxSent(t *testing.T) {
	f := newFixture(t)
	status, body := tunnelRequest(t, f, f.token, "GET /v1/x HTTP/1.1\r\nHost: "+f.token+"\r\nConnection: close\r\n\r\n")
	if status != 403 || strings.Contains(body, f.token) || strings.Contains(body, "bbx_") || !strings.Contains(body, f.host) {
		t.Errorf("a tunnel request with the token as its Host = %d %s, want 403 naming %s only", status, body, f.host)
	}
	srv := f.b.Server
	if err := srv.Audit.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	entries, err := srv.Store.ListAudit(t.Context(), store.AuditQuery{Box: "shop", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if strings.Contains(e.Message+e.Route+e.Method, "bbx_") {
			t.Errorf("an audit record holds the token: %+v", e)
		}
		found = found || e.Route == egressproxy.RouteTunnel && e.Status == 403
	}
	if !found {
		t.Errorf("no audit record of the refusal in %+v", entries)
	}
}

// openPassthrough opens a passthrough tunnel for the fixture's box and
// makes one request in it.
func openPassthrough(t *testing.T, f *fixture) net.Conn { return openPassthroughFor(t, f, f.token) }

func openPassthroughFor(t *testing.T, f *fixture, tok string) net.Conn {
	t.Helper()
	resp, body, c := connect(t, f, f.passHost, basic(tok))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s = %d %s", f.passHost, resp.StatusCode, body)
	}
	roots := x509.NewCertPool()
	roots.AddCert(f.passCert)
	tc := tls.Client(c, &tls.Config{ServerName: "127.0.0.1", RootCAs: roots, NextProtos: []string{"http/1.1"}})
	t.Cleanup(func() { tc.Close() })
	if err := passGet(tc); err != nil {
		t.Fatalf("a request in the passthrough tunnel: %v", err)
	}
	return tc
}

// openIntercepted opens an intercepted tunnel to the secret's host and
// makes one request in it.
func openIntercepted(t *testing.T, f *fixture) net.Conn {
	t.Helper()
	resp, body, c := connect(t, f, f.host, basic(f.token))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s = %d %s", f.host, resp.StatusCode, body)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: f.caPool, NextProtos: []string{"http/1.1"}})
	t.Cleanup(func() { tc.Close() })
	if err := interGet(f, tc); err != nil {
		t.Fatalf("a request in the intercepted tunnel: %v", err)
	}
	return tc
}

func passGet(c net.Conn) error {
	return get(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
}

func interGet(f *fixture, c net.Conn) error {
	return get(c, "GET /v1/open HTTP/1.1\r\nHost: "+f.host+"\r\nAuthorization: Bearer "+f.token+"\r\n\r\n")
}

// get sends raw on c and reads a 200 answer, leaving c open.
func get(c net.Conn, raw string) error {
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang only
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, raw); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return errors.New("status " + resp.Status)
	}
	return nil
}

// waitClosed reads c until the proxy closes it: nil then, or the error
// of a read that timed out (the guard) or read bytes.
func waitClosed(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a guard against a hang only
	n, err := c.Read(make([]byte, 1))
	if n > 0 {
		return errors.New("the tunnel carried a byte")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

// TestProxy_IdleTunnelsCountAgainstTheBoxsBound: a box cannot hold more
// tunnels open than its concurrency bound by leaving them idle between
// requests: with a bound of 3, the fourth CONNECT, intercepted or
// passthrough, is refused 429 in the protocol's shape; closing one frees
// its slot. Another box is not held to this one's tunnels.
func TestProxy_IdleTunnelsCountAgainstTheBoxsBound(t *testing.T) {
	const bound = 3
	f := newFixtureConfig(t, nil, func(c *server.Config) { c.BoxConcurrent = bound })
	var open []net.Conn
	for i := range bound {
		if i == 0 {
			open = append(open, openPassthrough(t, f))
			continue
		}
		resp, body, c := connect(t, f, f.host, basic(f.token))
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT %d of %d = %d %s, want 200", i+1, bound, resp.StatusCode, body)
		}
		open = append(open, c)
	}
	for _, authority := range []string{f.host, f.passHost} {
		resp, body, _ := connect(t, f, authority, basic(f.token))
		if typ, _ := brokertest.Refusal([]byte(body)); resp.StatusCode != 429 || typ != "rate_limit_error" || !strings.Contains(body, "tunnels open") {
			t.Errorf("CONNECT %s past the bound of %d = %d %s, want 429 rate_limit_error", authority, bound, resp.StatusCode, body)
		}
	}
	other := f.b.AddBox("other")
	f.b.Report(other, brokertest.Entry("egress"))
	if resp, body, _ := connect(t, f, f.passHost, basic(other)); resp.StatusCode != 200 {
		t.Errorf("another box's CONNECT = %d %s, want 200", resp.StatusCode, body)
	}

	// Closing a tunnel frees its slot once the proxy sees it closed.
	open[1].Close()
	deadline := time.Now().Add(20 * time.Second) // a guard against a hang only
	for {
		resp, body, c := connect(t, f, f.host, basic(f.token))
		if resp.StatusCode == 200 {
			c.Close()
			break
		}
		c.Close()
		if resp.StatusCode != 429 || time.Now().After(deadline) {
			t.Fatalf("CONNECT after closing a tunnel = %d %s, want 200", resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProxy_RefusedConnectIsLogged: a CONNECT the proxy refuses writes a
// log line naming the box, the status and the reason, as a refused
// request on the box-facing port does, and the line holds no token.
func TestProxy_RefusedConnectIsLogged(t *testing.T) {
	f := newFixture(t)
	quiet := f.b.AddBox("quiet")
	resp, _, _ := connect(t, f, f.passHost, basic(quiet))
	if resp.StatusCode != 403 {
		t.Fatalf("CONNECT %s by a box that never reported = %d, want 403", f.passHost, resp.StatusCode)
	}
	// Log lines are written out together within 100 ms: a bounded poll.
	deadline := time.Now().Add(5 * time.Second)
	for {
		logs := f.logs.String()
		if strings.Contains(logs, `"msg":"proxy refusal"`) && strings.Contains(logs, `"box":"quiet"`) && strings.Contains(logs, `"status":403`) {
			if strings.Contains(logs, quiet) {
				t.Errorf("the log holds the box's token")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the refused CONNECT in:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
