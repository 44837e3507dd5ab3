package egressproxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestProxy_ApprovedHostIsNeverReachedAtAPrivateAddress: a box asks for
// a host of its own choosing, which a person approves as an unknown
// host, and has its name answer with the broker's loopback (or writes
// the address itself, IPv4 or IPv6): the passthrough tunnel
// would reach the broker's own listeners, its database, its private
// network or the cloud's metadata service from inside. The approved
// CONNECT is refused (403) and nothing is dialled; an IP literal that is
// not public opens no proposal at all.
func TestProxy_ApprovedHostIsNeverReachedAtAPrivateAddress(t *testing.T) {
	f := newFixture(t)
	var reached atomic.Int32
	inside := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	inside.Config.ConnState = func(net.Conn, http.ConnState) { reached.Add(1) }
	inside.StartTLS()
	t.Cleanup(inside.Close)
	_, port, _ := net.SplitHostPort(inside.Listener.Addr().String())
	if err := f.b.Server.Approvals.SetAsk(t.Context(), "shop", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	tests := []string{
		"localhost:" + port, // a name that answers with loopback
		"127.0.0.1:" + port, // loopback written as such
		"[::1]:" + port,     // IPv6 loopback
	}
	for _, target := range tests {
		t.Run(target, func(t *testing.T) {
			if resp, body, _ := connect(t, f, target, basic(f.token)); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("CONNECT %s before approval = %d %s, want 403", target, resp.StatusCode, body)
			}
			ps, err := f.b.Server.Approvals.List(t.Context(), "shop", store.ProposalPending)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(target, "localhost") {
				// An address that is not public opens no proposal: no
				// approval could open it. Approve it all the same.
				if len(ps) != 0 {
					t.Errorf("pending = %+v; want none for %s", ps, target)
				}
				host, port, _ := net.SplitHostPort(target)
				approveHost(t, f, net.JoinHostPort(host, port))
			} else if len(ps) != 1 {
				t.Fatalf("pending = %+v; want one", ps)
			} else if _, err := f.b.Server.Approvals.Approve(t.Context(), ps[0].ID, 0, true, "test"); err != nil {
				t.Fatal(err)
			}
			resp, body, _ := connect(t, f, target, basic(f.token))
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "public") {
				t.Errorf("CONNECT %s after approval = %d %s, want 403 saying the address is not public", target, resp.StatusCode, body)
			}
			if strings.HasPrefix(target, "localhost") && (strings.Contains(body, "127.0.0.1") || strings.Contains(body, "::1")) {
				t.Errorf("the refusal of %s = %s; it tells the box what the name resolves to", target, body)
			}
		})
	}
	f.dials.mu.Lock()
	dialled := append([]string(nil), f.dials.addrs...)
	f.dials.mu.Unlock()
	if len(dialled) != 0 || reached.Load() != 0 {
		t.Errorf("the proxy dialled %v (%d connections reached the loopback host), want nothing", dialled, reached.Load())
	}
}

// TestPublic: the addresses a host approved as unknown may be reached at.
func TestPublic(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"93.184.215.14", true},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", true},
		{"127.0.0.1", false},
		{"127.1.2.3", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:93.184.215.14", true},
		{"169.254.169.254", false}, // cloud metadata
		{"fd00:ec2::254", false},   // AWS's metadata over IPv6
		{"fe80::1%eth0", false},
		{"10.0.0.5", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"100.100.100.200", false}, // shared space (Alibaba's metadata, tailnets)
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"::", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"64:ff9b::7f00:1", false},     // NAT64 of 127.0.0.1
		{"64:ff9b::5db8:d70e", true},   // NAT64 of 93.184.215.14
		{"2002:a9fe:a9fe::1", false},   // 6to4 of 169.254.169.254
		{"2001:0:4136:e378::1", false}, // Teredo
		{"198.18.0.1", false},
	}
	for _, tt := range tests {
		if got := egressproxy.Public(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Public(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// TestProxy_PassthroughServerNameMustBeItsHost: through a passthrough
// tunnel to a host on the list, the box opens TLS asking for another
// name, here the host its secret API is pinned to (as one front end
// serves many names at one address): the broker would carry, unread,
// what that host kept of the value it wrote there. The tunnel is closed
// at the hello; the host never answers it, and the record says why.
func TestProxy_PassthroughServerNameMustBeItsHost(t *testing.T) {
	f := newFixture(t)
	roots := x509.NewCertPool()
	roots.AddCert(f.passCert) // httptest's certificate names example.com too
	resp, body, conn := connect(t, f, f.passHost, basic(f.token))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s = %d %s, want 200 (passthrough)", f.passHost, resp.StatusCode, body)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(conn, &tls.Config{RootCAs: roots, ServerName: "example.com"})
	if err := tc.Handshake(); err == nil {
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
		got, _ := io.ReadAll(tc)
		t.Fatalf("TLS for example.com through the tunnel to %s: answered %q, want the tunnel closed at the hello", f.passHost, got)
	}
	var entries []store.AuditEntry
	for range 200 { // the tunnel's record is written as it ends
		if err := f.b.Server.Audit.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		entries, _ = f.b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "shop", Limit: 100})
		if slices.ContainsFunc(entries, func(e store.AuditEntry) bool { return e.Route == egressproxy.RoutePassthrough }) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.ContainsFunc(entries, func(e store.AuditEntry) bool {
		return e.Route == egressproxy.RoutePassthrough && e.Reason == "host" && strings.Contains(e.Message, "TLS server name")
	}) {
		t.Errorf("audit = %+v, want the passthrough tunnel recorded as closed for its TLS server name", entries)
	}
}

// TestProxy_UnauthenticatedBodyIsNeverRead: a client with no box's token
// sends the proxy the head of a plain-HTTP request whose body never
// comes (announced, or chunked). Its refusal arrives at once, with the
// connection closed: the proxy's listener has no bound on reading a
// body, and net/http would otherwise read up to 256 KiB of one left
// unread before answering, holding the connection for as long as the
// client trickles it.
func TestProxy_UnauthenticatedBodyIsNeverRead(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, auth, body string
		want             int
	}{
		{"no token, announced", "", "Content-Length: 100000\r\n\r\n{", http.StatusProxyAuthRequired},
		{"no token, chunked", "", "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", http.StatusProxyAuthRequired},
		{"unknown token, announced", "Proxy-Authorization: Bearer bbx_unknown\r\n", "Content-Length: 100000\r\n\r\n{", http.StatusProxyAuthRequired},
		{"not absolute form", "", "Content-Length: 100000\r\n\r\n{", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", f.proxy.Host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			target := "http://" + f.host + "/v1/x"
			if tt.want == http.StatusBadRequest {
				target = "/v1/x"
			}
			head := "POST " + target + " HTTP/1.1\r\nHost: " + f.host + "\r\n" + tt.auth + tt.body
			if _, err := io.WriteString(c, head); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a guard against a hang only
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer while the body is unsent: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want || !resp.Close {
				t.Errorf("POST %s with an unsent body = %d (close %v), want %d with the connection closed", target, resp.StatusCode, resp.Close, tt.want)
			}
		})
	}
}

// TestProxy_AnotherFormOfASecretsIPIsTheSecretsHost: a secret pinned to
// an IPv6 address written one way (2606:4700:0:0::1111), and the same
// address on the passthrough list written another (2606:4700::1111): a
// CONNECT there is the secret's host, and gets no passthrough tunnel
// (which the broker does not read); nothing is dialled.
func TestProxy_AnotherFormOfASecretsIPIsTheSecretsHost(t *testing.T) {
	var dialled atomic.Int32
	f := newFixtureProxy(t, nil, nil, func(c *egressproxy.Config) {
		c.Passthrough = append(c.Passthrough, "[2606:4700::1111]:443")
		c.Dial = func(context.Context, string, string) (net.Conn, error) {
			dialled.Add(1)
			return nil, errors.New("test: no dial")
		}
	})
	f.b.SetSecret("shop", "V6", "https://[2606:4700:0:0::1111]", secretValue)
	f.b.Report(f.token, brokertest.Entry("egress", "API", "V6"))
	for _, target := range []string{"[2606:4700::1111]:443", "[2606:4700:0::1111]:443", "[2606:4700:0:0:0:0:0:1111]:443"} {
		resp, body, _ := connect(t, f, target, basic(f.token))
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "V6") {
			t.Errorf("CONNECT %s = %d %s, want 403 naming V6, the secret pinned there", target, resp.StatusCode, body)
		}
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("the proxy dialled %d times, want none", n)
	}
}

// TestProxy_PassthroughRefusalNamesEverySecretPinnedThere: a box with
// two secrets pinned to a passthrough host is refused a tunnel there,
// and the refusal names both, in a sentence that reads as English
// ("secrets A and B are pinned"), and a box with one names it alone.
func TestProxy_PassthroughRefusalNamesEverySecretPinnedThere(t *testing.T) {
	f := newFixtureProxy(t, nil, nil, func(c *egressproxy.Config) {
		c.Passthrough = append(c.Passthrough, "pinned.example:443")
		c.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("test: no dial") }
	})
	f.b.SetSecret("shop", "ONE", "https://pinned.example", secretValue)
	f.b.Report(f.token, brokertest.Entry("egress", "API", "ONE"))
	_, body, _ := connect(t, f, "pinned.example:443", basic(f.token))
	if !strings.Contains(body, "this box's secret ONE is pinned to pinned.example") || !strings.Contains(body, "pins the secret elsewhere") {
		t.Errorf("CONNECT with one secret pinned there = %s, want it named: secret ONE is pinned", body)
	}
	f.b.SetSecret("shop", "TWO", "https://pinned.example/v2", secretValue)
	_, body, _ = connect(t, f, "pinned.example:443", basic(f.token))
	if !strings.Contains(body, "this box's secrets ONE and TWO are pinned to pinned.example") || !strings.Contains(body, "pins the secrets elsewhere") {
		t.Errorf("CONNECT with two secrets pinned there = %s, want both named: secrets ONE and TWO are pinned", body)
	}
}

// TestProxy_RefusedConnectsAreHeldToTheBoxsRate: a box sends CONNECTs
// the proxy refuses (hosts no secret is pinned to, in ask mode) as fast
// as it can. Each would have the broker read the box's secrets and its
// approvals and write a proposal; past the box's rate each is a 429
// instead, before the store is read.
func TestProxy_RefusedConnectsAreHeldToTheBoxsRate(t *testing.T) {
	f := newFixtureConfig(t, nil, func(c *server.Config) { c.BoxRate, c.BoxBurst = 0.001, 3 }) // the fixture's report takes one
	if err := f.b.Server.Approvals.SetAsk(t.Context(), "shop", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	var statuses []int
	for i := range 8 {
		resp, _, _ := connect(t, f, "unknown"+strconv.Itoa(i)+".example:443", basic(f.token))
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("CONNECT %d: 429 without Retry-After", i)
		}
	}
	want := []int{403, 403, 429, 429, 429, 429, 429, 429}
	if !slices.Equal(statuses, want) {
		t.Errorf("statuses of 8 refused CONNECTs = %v, want %v (rate 0.001/s, burst 3, one taken by the report)", statuses, want)
	}
	ps, err := f.b.Server.Approvals.List(t.Context(), "shop", store.ProposalPending)
	if err != nil || len(ps) != 2 {
		t.Errorf("pending proposals = %d, %v; want 2, one for each CONNECT within the rate", len(ps), err)
	}
}

// approveHost opens a proposal for box shop's CONNECT to addr and
// approves it, as a person would.
func approveHost(t *testing.T, f *fixture, addr string) {
	t.Helper()
	v, err := f.b.Server.Approvals.Refused(t.Context(), approval.Attempt{Attempt: store.Attempt{Box: "shop", Kind: store.ProposalHost,
		Method: http.MethodConnect, Host: addr, Reason: "test"}, TokenHash: token.Hash(f.token)})
	if err != nil || v.Proposal.ID == "" {
		t.Fatalf("open a proposal for %s: %+v, %v", addr, v, err)
	}
	if _, err := f.b.Server.Approvals.Approve(t.Context(), v.Proposal.ID, 0, true, "test"); err != nil {
		t.Fatal(err)
	}
}
