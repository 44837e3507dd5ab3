package egressproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/store"
)

// TestProxy_AuditMarksProxied: a request through the proxy is in the
// audit log like an egress one, its route marked "proxy"; a refused
// CONNECT and a passthrough tunnel are there too.
func TestProxy_AuditMarksProxied(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, f.token, f.caPool, false)
	resp, err := c.Get("https://" + f.host + "/v1/x")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := c.Get("https://api.github.com/"); err == nil {
		t.Fatal("an undeclared host was reached")
	}
	_, _, pc := connect(t, f, f.passHost, basic(f.token))
	pc.Close()
	srv := f.b.Server
	// The passthrough's record is written as its tunnel ends.
	var entries []store.AuditEntry
	for range 200 {
		if err := srv.Audit.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		entries, err = srv.Store.ListAudit(t.Context(), store.AuditQuery{Box: "shop", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if hasRoute(entries, egressproxy.RoutePassthrough) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := map[string]bool{"proxy /egress/*": false, egressproxy.RouteConnect: false, egressproxy.RoutePassthrough: false}
	for _, e := range entries {
		if _, ok := want[e.Route]; ok {
			want[e.Route] = true
		}
		if e.Route == egressproxy.RouteConnect && (e.Status != 403 || !strings.Contains(e.Message, "egress")) {
			t.Errorf("the refused CONNECT's record = %+v", e)
		}
	}
	for route, seen := range want {
		if !seen {
			t.Errorf("no audit record with route %q in %+v", route, entries)
		}
	}
}

func hasRoute(entries []store.AuditEntry, route string) bool {
	for _, e := range entries {
		if e.Route == route {
			return true
		}
	}
	return false
}

// TestProxy_PlainHTTPAbsoluteForm: a plain-HTTP request in absolute form
// goes to a secret pinned to its http:// host and port, with the value
// in the token's place; another port is refused.
func TestProxy_PlainHTTPAbsoluteForm(t *testing.T) {
	f := newFixture(t)
	up := &recorder{}
	hs := httptest.NewServer(up)
	t.Cleanup(hs.Close)
	f.b.SetSecret("shop", "PLAIN", hs.URL+"/base", secretValue)
	f.b.Report(f.token, brokertest.Entry("egress", "API", "PLAIN"))
	c := f.client(t, f.token, f.caPool, false)
	req, _ := http.NewRequest("GET", hs.URL+"/base/items?x=1", nil)
	req.Header.Set("X-Api-Key", f.token)
	if status, body := send(t, c, req); status != 200 || bytes.Contains(body, []byte(secretValue)) {
		t.Fatalf("plain request = %d %s", status, body)
	}
	if seen := up.all(); !strings.Contains(seen, "GET /base/items?x=1") || !strings.Contains(seen, "X-Api-Key: "+secretValue) || strings.Contains(seen, f.token) {
		t.Errorf("the plain host saw:\n%s", seen)
	}
	// The secret's base path bounds what the proxy reaches at the host.
	resp, err := c.Get(hs.URL + "/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("a path outside the secret's base = %d, want 403", resp.StatusCode)
	}
	u, _ := url.Parse(hs.URL)
	u.Host = "127.0.0.1:1"
	resp, err = c.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("another port = %d, want 403", resp.StatusCode)
	}
}

// TestProxy_IdleTunnelsTimeOut: a passthrough tunnel in which nothing
// moves, and an intercepted one idle after a request, are closed by the
// proxy.
func TestProxy_IdleTunnelsTimeOut(t *testing.T) {
	f := newFixture(t)
	srv := f.b.Server
	ca, err := proxyca.Load(t.Context(), srv.Store, srv.Keyring, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A passthrough host that accepts and then says nothing.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	p, err := egressproxy.New(egressproxy.Config{Broker: srv.Broker, BrokerWord: "lobby", Cache: srv.Cache, Secrets: srv.Store, CA: ca,
		Passthrough: []string{silent.Addr().String()}, IdleTimeout: 50 * time.Millisecond, ReadHeaderTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f.proxy = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	resp, _, c := connect(t, f, silent.Addr().String(), basic(f.token))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT to the passthrough host = %d", resp.StatusCode)
	}
	// A guard against a hang only: the proxy closes the tunnel long before.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read on an idle tunnel = %d, %v, want EOF (closed by the proxy)", n, err)
	}

	// Intercepted: one request, then nothing.
	_, _, ic := connect(t, f, f.host, basic(f.token))
	tc := tls.Client(ic, &tls.Config{ServerName: "example.com", RootCAs: f.caPool, NextProtos: []string{"http/1.1"}})
	io.WriteString(tc, "GET /v1/x HTTP/1.1\r\nHost: "+f.host+"\r\n\r\n")
	br := bufio.NewReader(tc)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tc.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang only
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read on an idle intercepted tunnel = %d, %v, want EOF (closed by the proxy)", n, err)
	}
}

// TestLoadCA_ReplicasRaceToOneCA: brokers starting at once on one store
// all end with the same CA.
func TestLoadCA_ReplicasRaceToOneCA(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	const n = 6
	pems := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ca, err := proxyca.Load(context.Background(), b.Server.Store, b.Server.Keyring, nil)
			errs[i] = err
			if err == nil {
				pems[i] = ca.CertPEM()
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("LoadCA %d: %v", i, errs[i])
		}
		if !bytes.Equal(pems[i], pems[0]) {
			t.Errorf("LoadCA %d has another CA than LoadCA 0", i)
		}
	}
	rec, err := b.Server.Store.ProxyCA(t.Context())
	if err != nil || !bytes.Equal(rec.CertPEM, pems[0]) {
		t.Errorf("the store's CA is not the one every LoadCA returned: %v", err)
	}
	if bytes.Contains(rec.SealedKey, []byte("PRIVATE KEY")) {
		t.Errorf("the CA's key is stored unsealed")
	}
}
