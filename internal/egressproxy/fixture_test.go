package egressproxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/server"
)

// secretValue is the egress secret's value: the host must see it, and
// the box never.
const secretValue = "sv_proxy_SECRET_value_0123456789"

// fixture is a broker with its HTTPS proxy, an echoing secret host
// reached as example.com:<port> (its certificate names example.com), a
// passthrough host, and box "shop" whose report declares egress API.
type fixture struct {
	b     *brokertest.Broker
	proxy *url.URL // http://<addr>, no credentials
	p     *egressproxy.Proxy
	token string
	// host is the secret's host:port (example.com:<port>), and passHost
	// the passthrough host's (127.0.0.1:<port>).
	host, passHost string
	up             *recorder
	pass           *passHost
	upCert         *x509.Certificate
	passCert       *x509.Certificate
	// caFile holds the proxy CA's certificate, for real clients.
	caFile string
	caPool *x509.CertPool
	// dials records each address the proxy dialled for a passthrough
	// tunnel, before it answers the CONNECT.
	dials *dialLog
	// logs receives the broker's logs.
	logs *brokertest.Buffer
}

// dialLog is the addresses a proxy dialled.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// count is how many times addr was dialled.
func (d *dialLog) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.addrs {
		if a == addr {
			n++
		}
	}
	return n
}

// recorder is an echoing secret host: it answers with every header it
// received (in its own headers and body), as a careless or hostile host
// would, and keeps every request's head. A path holding /links/ is
// answered with links instead (serveLinks).
type recorder struct {
	mu   sync.Mutex
	seen []string
	// git, when set, serves /owner/ (a smart-HTTP git stand-in), after
	// the request's head is kept and its headers echoed.
	git http.Handler
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.URL.Path, "/links/") {
		serveLinks(w, r)
		return
	}
	if rec.git != nil && strings.HasPrefix(r.URL.Path, "/owner/") {
		var head strings.Builder
		fmt.Fprintf(&head, "%s %s\n", r.Method, r.URL.RequestURI())
		for k, vs := range r.Header {
			for _, v := range vs {
				fmt.Fprintf(&head, "%s: %s\n", k, v)
				w.Header().Add("X-Echo-"+k, v)
			}
		}
		rec.mu.Lock()
		rec.seen = append(rec.seen, head.String())
		rec.mu.Unlock()
		rec.git.ServeHTTP(w, r)
		return
	}
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s %s\n", r.Method, r.URL.RequestURI(), r.Proto)
	for k, vs := range r.Header {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\n", k, v)
			w.Header().Add("X-Echo-"+k, v)
		}
	}
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.seen = append(rec.seen, head.String()+"\n"+string(body))
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, head.String()+"\n"+string(body))
}

func (rec *recorder) all() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return strings.Join(rec.seen, "\n----\n")
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with git serving /owner/ on the secret's
// host and on the passthrough host.
func newFixtureWith(t testing.TB, git http.Handler) *fixture { return newFixtureConfig(t, git, nil) }

// newFixtureConfig is newFixtureWith with the broker's configuration
// changed by cfg (when not nil).
func newFixtureConfig(t testing.TB, git http.Handler, cfg func(*server.Config)) *fixture {
	t.Helper()
	return newFixtureProxy(t, git, cfg, nil)
}

// newFixtureProxy is newFixtureConfig with the proxy's configuration
// changed by pcfg (when not nil).
func newFixtureProxy(t testing.TB, git http.Handler, cfg func(*server.Config), pcfg func(*egressproxy.Config)) *fixture {
	t.Helper()
	f := &fixture{up: &recorder{git: git}, dials: &dialLog{}, logs: &brokertest.Buffer{}}
	ups := httptest.NewUnstartedServer(f.up)
	ups.EnableHTTP2 = true
	ups.StartTLS()
	t.Cleanup(ups.Close)
	f.upCert = ups.Certificate()
	upAddr := ups.Listener.Addr().String()
	_, upPort, _ := net.SplitHostPort(upAddr)
	f.host = "example.com:" + upPort

	f.pass = &passHost{git: git}
	pass := httptest.NewTLSServer(f.pass)
	t.Cleanup(pass.Close)
	f.passCert = pass.Certificate()
	f.passHost = pass.Listener.Addr().String()

	// The broker's egress transport trusts the secret host's certificate
	// and reaches example.com at the host's loopback address.
	roots := x509.NewCertPool()
	roots.AddCert(f.upCert)
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == f.host {
				addr = upAddr
			} else if port, ok := strings.CutPrefix(addr, "www.example.com:"); ok {
				addr = "127.0.0.1:" + port // the passthrough host, as a secret's host for the benchmark
			} else if !strings.HasPrefix(addr, "127.0.0.1:") {
				return nil, fmt.Errorf("test transport: no dial to %s", addr)
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	f.b = brokertest.New(t, brokertest.Options{Config: cfg, Logs: f.logs, ServerOptions: func(o *server.Options) { o.Transport = tr }})
	srv := f.b.Server
	f.token = f.b.AddBox("shop")
	f.b.SetSecret("shop", "API", "https://"+f.host, secretValue)
	f.b.Report(f.token, brokertest.Entry("egress", "API"))

	ca, err := proxyca.Load(t.Context(), srv.Store, srv.Keyring, nil)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	pc := egressproxy.Config{
		Broker: srv.Broker, BrokerWord: "lobby", Cache: srv.Cache, Secrets: srv.Store, CA: ca,
		Passthrough: []string{f.passHost}, Dial: f.dials.dial,
		MaxTunnels: max(srv.Config.BoxConcurrent, 0), Recheck: 20 * time.Millisecond, Approvals: srv.Approvals,
		Logger: slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if pcfg != nil {
		pcfg(&pc)
	}
	p, err := egressproxy.New(pc)
	if err != nil {
		t.Fatalf("egressproxy.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f.proxy = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	f.p = p

	f.caPool = x509.NewCertPool()
	f.caPool.AppendCertsFromPEM(ca.CertPEM())
	f.caFile = filepath.Join(t.TempDir(), "proxy-ca.pem")
	if err := os.WriteFile(f.caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// proxyURL is the proxy's URL with tok as the Basic password.
func (f *fixture) proxyURL(tok string) *url.URL {
	u := *f.proxy
	u.User = url.UserPassword("box", tok)
	return &u
}

// client is Go's http.Client through the proxy with tok, trusting roots.
func (f *fixture) client(t testing.TB, tok string, roots *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		Proxy:             http.ProxyURL(f.proxyURL(tok)),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: h2,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// passHost is the passthrough host: it says so, or serves git.
type passHost struct{ git http.Handler }

func (p *passHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.git != nil && strings.HasPrefix(r.URL.Path, "/owner/") {
		p.git.ServeHTTP(w, r)
		return
	}
	io.WriteString(w, "passthrough host, its own certificate; auth="+r.Header.Get("Authorization"))
}

// caPEMOf is c in PEM.
// send sends req through c, a box's client, and returns the answer's
// status and body.
func send(t testing.TB, c *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, body
}

func caPEMOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
