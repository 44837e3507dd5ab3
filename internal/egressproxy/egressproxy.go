// Package egressproxy serves egress as an HTTPS proxy: a box whose tools
// honour HTTPS_PROXY (git, gh, package managers, SDKs that pin their
// endpoint) reaches its secrets' hosts through the broker without a base
// URL, under the same rule and the same forwarding as /egress/NAME.
//
// The box sets HTTPS_PROXY=http://box:<token>@<broker's proxy address>
// and trusts the broker's CA (boxbroker proxy ca). For each connection:
//
//   - A CONNECT host:port, or a plain-HTTP request in absolute form, must
//     carry the box's token in Proxy-Authorization (Basic, any user, the
//     token as the password; or Bearer). A missing or unknown token is
//     answered 407 with Proxy-Authenticate.
//   - A paused box is refused. A host:port on the passthrough list is
//     tunnelled untouched, and audited, for a box whose last report
//     declares egress and that has no secret pinned to that host (any
//     port): the broker does not read a passthrough tunnel, so it could
//     not keep out of it what it wrote to a secret's host for the box.
//     A host approved as unknown (Approvals) is tunnelled so too, but
//     only to addresses the broker looked up itself and Reach allows
//     (Public by default), so that a name the box controls cannot lead
//     the tunnel into the broker's own network. A passthrough tunnel
//     whose TLS ClientHello asks for a server name other than the
//     CONNECT's host is closed before the host reads a byte of it.
//     Any other is allowed only when the box's last report declares
//     egress with the scope word NAME of a secret pinned to exactly that
//     host and port (an IP literal only where a secret is pinned to it);
//     otherwise a 403 names egress and the secrets that would allow it,
//     or says that none is pinned there.
//   - A box holds at most MaxTunnels tunnels open at once (429 past it).
//     Every open tunnel is judged again every Recheck, and closed once
//     its CONNECT would be refused: its box paused, its token rotated,
//     the box removed, or its report no longer declaring what the tunnel
//     needs.
//   - An allowed CONNECT is intercepted: the broker ends TLS (1.2 and
//     later) with a leaf certificate for the host from its CA (package
//     proxyca), and serves the tunnel's requests with net/http, HTTP/1.1
//     or HTTP/2 as the client offers through ALPN.
//   - Each request in the tunnel whose Host is the CONNECT's host is
//     handed, in process, to the broker's own handler as
//     /egress/NAME/<path> (NAME the declared secret pinned there whose
//     base path the request's path is under), through the broker's
//     ServeHandoff with the box's token and source as the proxy read
//     them (broker.Handoff): the broker authenticates it by that
//     token, applies the rule, the pause and the box's rate and
//     concurrency bounds, and egress swaps the token for the value,
//     sends it to the secret's host over verified TLS, keeps the value
//     out of the answer, and audits it (its route is "proxy /egress/*").
//     Budgets do not apply to egress. The request is marked
//     egress.InTunnel: its client asked the host's own URL, so links in
//     the answer keep naming the host, and following them comes back
//     through the proxy.
//   - Idle tunnels and idle connections time out.
//
// The CA's key never leaves the broker: it is sealed at rest, shared by
// replicas through the store, and never printed.
package egressproxy

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/egress"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// Defaults for Config's zero fields.
const (
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultDialTimeout       = 10 * time.Second
	DefaultRecheck           = time.Second
	DefaultCARefresh         = time.Minute
)

// RoutePrefix begins the route label of every request the proxy serves,
// in logs, metrics, the audit log and the owner's page: a request in an
// intercepted tunnel is labelled by the broker with its route behind it
// ("proxy /egress/*").
const RoutePrefix = "proxy "

// Route labels of what the proxy answers itself.
const (
	RouteConnect     = RoutePrefix + "CONNECT"
	RoutePassthrough = RoutePrefix + "passthrough"
	// RouteTunnel labels a request in an intercepted tunnel that the
	// proxy refuses before the broker sees it.
	RouteTunnel = RoutePrefix + protocol.PrefixEgress + "/*"
)

// maxHost bounds the host a CONNECT names.
const maxHost = 253

// Config configures a Proxy.
type Config struct {
	// Broker is the broker's box-facing handler: intercepted requests are
	// served by it, and the proxy's own refusals and tunnels are told to
	// its Observer. Required.
	Broker *broker.Server
	// BrokerWord is the broker word reports must name. Required.
	BrokerWord string
	// Cache reads boxes, reports and secrets. Required.
	Cache *cache.Cache
	// Secrets lists a box's secrets, for the CONNECT rule. Required.
	Secrets store.Secrets
	// CA mints the leaf certificates. Required.
	CA *proxyca.CA
	// CARefresh is how often Serve reads the CA again from the store, to
	// follow a rotation another process made (default
	// DefaultCARefresh).
	CARefresh time.Duration
	// Passthrough are the host:port (or host, meaning port 443) the proxy
	// tunnels untouched, for a box that is not paused, declares egress,
	// and has no secret pinned to the host.
	Passthrough []string
	// MaxTunnels bounds the tunnels, intercepted and passthrough, one box
	// holds open at once; past it a CONNECT is answered 429. 0 is no
	// bound.
	MaxTunnels int
	// Recheck is how often every open tunnel is judged again, to close
	// those whose box may no longer have them (default DefaultRecheck).
	Recheck time.Duration
	// IdleTimeout ends a tunnel or connection idle this long (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's head, and the TLS
	// handshake (default DefaultReadHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request's head (0: net/http's default).
	MaxHeaderBytes int
	// Dial connects a passthrough tunnel (default a net.Dialer with
	// DefaultDialTimeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Resolve looks up the addresses of a host approved as unknown, which
	// a passthrough tunnel to it is dialled at (default
	// net.DefaultResolver's LookupNetIP).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Reach reports whether a passthrough tunnel to a host approved as
	// unknown may go to an address (default Public); a host with an
	// address it refuses is refused. The hosts of Passthrough, which the
	// operator names, are dialled by name, unjudged.
	Reach func(netip.Addr) bool
	// Approvals, when set, lets a CONNECT to a host with no secret and
	// no passthrough entry through as a passthrough tunnel when an
	// approval of that host:port is in force, and opens a proposal for
	// one when the box's owner asks about unknown hosts (package
	// approval). An approved host never carries a secret. Nil refuses
	// them all.
	Approvals *approval.Service
	// Logger receives failures; never a token or a value.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Proxy is the HTTPS proxy listener's handler.
type Proxy struct {
	cfg         Config
	log         *slog.Logger
	passthrough map[string]bool // host:port
	// inner serves intercepted tunnels, fed through conns.
	inner *http.Server
	conns *connListener
	// tunnels holds each intercepted connection's tunnel until net/http
	// is done with it, for ConnContext, and to release it then.
	tunnels sync.Map // *tls.Conn → *held

	mu   sync.Mutex
	open map[string]map[*held]struct{} // guarded by mu: each box's open tunnels

	// handlers counts the handlers running, of both servers, for Serve to
	// wait for once it has closed their connections.
	handlers sync.WaitGroup
}

// closedWait bounds Serve's wait, once its connections are closed, for
// the handlers still running to return.
const closedWait = 5 * time.Second

// New returns a Proxy, or an error naming what cfg lacks or gets wrong.
func New(cfg Config) (*Proxy, error) {
	var problems []string
	if cfg.Broker == nil || cfg.Cache == nil || cfg.Secrets == nil || cfg.CA == nil || cfg.BrokerWord == "" {
		problems = append(problems, "proxy: no broker, broker word, cache, secrets or CA")
	}
	pass := map[string]bool{}
	for _, h := range cfg.Passthrough {
		hp, err := ParsePassthrough(h)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		pass[hp] = true
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	defaults.Positive(&cfg.IdleTimeout, DefaultIdleTimeout)
	defaults.Positive(&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defaults.Positive(&cfg.Recheck, DefaultRecheck)
	defaults.Positive(&cfg.CARefresh, DefaultCARefresh)
	defaults.Logger(&cfg.Logger)
	defaults.Clock(&cfg.Now)
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.Reach == nil {
		cfg.Reach = Public
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: DefaultDialTimeout}
		cfg.Dial = d.DialContext
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, passthrough: pass, conns: newConnListener(), open: map[string]map[*held]struct{}{}}
	p.inner = p.server(http.HandlerFunc(p.serveTunnel))
	p.inner.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if h, ok := p.tunnels.Load(c); ok {
			return context.WithValue(ctx, tunnelKey{}, h.(*held))
		}
		return ctx
	}
	p.inner.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed || s == http.StateHijacked {
			if h, ok := p.tunnels.LoadAndDelete(c); ok {
				p.release(h.(*held))
			}
		}
	}
	return p, nil
}

// server is an http.Server serving h within the proxy's bounds, its
// handlers counted in p.handlers (Serve waits for them at shutdown). On
// HTTP/2 (an intercepted tunnel's ALPN) ReadHeaderTimeout bounds nothing,
// so a connection silent that long is sent a PING and closed unanswered:
// a box in the middle of a header block can send only CONTINUATION.
func (p *Proxy) server(h http.Handler) *http.Server {
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.handlers.Add(1)
		defer p.handlers.Done()
		h.ServeHTTP(w, r)
	})
	return &http.Server{Handler: counted, ReadHeaderTimeout: p.cfg.ReadHeaderTimeout, IdleTimeout: p.cfg.IdleTimeout,
		MaxHeaderBytes: p.cfg.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		HTTP2: &http.HTTP2Config{SendPingTimeout: p.cfg.ReadHeaderTimeout, PingTimeout: p.cfg.ReadHeaderTimeout}}
}

// ParsePassthrough reads one passthrough entry, host or host:port (port
// 443 when none), into its canonical host:port.
func ParsePassthrough(s string) (string, error) {
	s = strings.TrimSpace(s)
	host, port := s, "443"
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	n, err := strconv.Atoi(port)
	if hostName(host) == "" || strings.ContainsAny(host, "/@ :[]") && net.ParseIP(host) == nil || err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("proxy passthrough %q is not a host or host:port", s)
	}
	return net.JoinHostPort(hostName(host), port), nil
}

// Handler returns the listener's handler, for an http.Server of the
// caller's own (Serve makes one).
func (p *Proxy) Handler() http.Handler { return http.HandlerFunc(p.serveProxy) }

// Serve serves the proxy on ln until ctx ends; then it closes every
// tunnel and connection and returns once the handlers still running have
// returned (at most 5 s), what they served recorded. Intercepted tunnels' requests run
// on the broker's handler, so in-flight ones end with ctx too. While it
// serves, every open tunnel is judged again every Recheck, and the CA
// read again every CARefresh.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	outer := p.server(p.Handler())
	outer.BaseContext = func(net.Listener) context.Context { return ctx }
	p.inner.BaseContext = outer.BaseContext
	errc := make(chan error, 2)
	go func() { errc <- outer.Serve(ln) }()
	go func() { errc <- p.inner.Serve(p.conns) }()
	rctx, stopRecheck := context.WithCancel(ctx)
	defer stopRecheck()
	var warned time.Time
	go every(rctx, p.cfg.Recheck, func() { p.recheck(rctx) })
	go every(rctx, p.cfg.CARefresh, func() { p.refreshCA(rctx, &warned) })
	var first error
	select {
	case first = <-errc:
	case <-ctx.Done():
	}
	outer.Close()
	p.inner.Close()
	second := <-errc
	// The handlers still running end with their connections; each
	// records what it served as it returns, before the caller goes on
	// to close the store and the journal.
	done := make(chan struct{})
	go func() { p.handlers.Wait(); close(done) }()
	t := time.NewTimer(closedWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.log.Warn("proxy: requests still running after their connections were closed", "waited", closedWait.String())
	}
	for _, err := range []error{first, second} {
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			return err
		}
	}
	return nil
}

// target is where a box asked the proxy to go: a CONNECT's host:port
// (scheme https) or a plain request's (scheme http).
type target struct {
	scheme string
	host   string // lower case; an IP literal without brackets
	port   string
}

func (t target) addr() string { return net.JoinHostPort(t.host, t.port) }

// tunnel is what the proxy allowed one box to reach: the box, its
// token, and the declared secrets pinned to the target.
type tunnel struct {
	box   string
	token string
	// tokenHash is token's hash, as the box was admitted with it: the
	// box's secrets are read while it holds that token.
	tokenHash string
	// from is where the box sent its CONNECT from (broker.Source), by
	// which its token's binding is judged for the tunnel's life.
	from  netip.Addr
	to    target
	names []string
	// approved says the tunnel is a passthrough tunnel to a host approved
	// as unknown, which goes only to addresses Config.Reach allows.
	approved bool
}

type tunnelKey struct{}

// serveProxy serves the listener: CONNECT, or a plain-HTTP request in
// absolute form.
func (p *Proxy) serveProxy(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.URL.IsAbs():
		p.plain(w, r)
	default:
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInvalid, "%s",
			"This is boxbroker's egress proxy: send CONNECT host:port, or a plain-HTTP request in absolute form, with the box's token in Proxy-Authorization (HTTPS_PROXY=http://box:<token>@<this address>)."), p.cfg.Now(), RouteTunnel)
	}
}

func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, t *tunnel, err error, start time.Time, route string) {
	rec := &broker.Record{At: start, Method: r.Method, Route: route, Capability: protocol.Egress}
	if t != nil {
		rec.Box, rec.Words = t.box, t.names
	}
	p.cfg.Broker.Refuse(w, r, err, rec)
}

// connect serves CONNECT host:port.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	start := p.cfg.Now()
	to, ok := parseTarget("https", r.Host)
	if !ok {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInvalid, "CONNECT takes host:port, such as api.github.com:443."), start, RouteConnect)
		return
	}
	t, passthrough, err := p.judge(r.Context(), token.FromProxyAuthorization(r.Header), p.cfg.Broker.Source(r), to, true)
	if err != nil {
		p.refuse(w, r, t, err, start, RouteConnect)
		return
	}
	route := RouteConnect
	if passthrough {
		route = RoutePassthrough
	}
	h, err := p.hold(t, passthrough)
	if err != nil {
		p.refuse(w, r, t, err, start, route)
		return
	}
	if passthrough {
		defer p.release(h)
		p.cfg.Broker.ServeHandoff(w, r, broker.Handoff{Token: t.token, From: t.from, Counted: true, Tunnel: &broker.Tunnel{
			Capability: protocol.Egress, Route: RoutePassthrough, Words: t.names,
			Serve: func(w http.ResponseWriter, r *http.Request) (broker.TunnelEnd, error) {
				return p.servePassthrough(w, r, h)
			},
		}})
		return
	}
	leaf, err := p.cfg.CA.Leaf(to.host)
	if err != nil {
		p.release(h)
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInternal, "The broker could not make a certificate for the host.").WithErr(fmt.Errorf("proxy: leaf certificate for %s: %w", to.host, err)), start, RouteConnect)
		return
	}
	conn, err := hijack(w)
	if err != nil || !h.attach(conn) {
		p.release(h)
		return
	}
	tc := tls.Server(conn, &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"h2", "http/1.1"},
	})
	p.tunnels.Store(tc, h)
	if !p.conns.put(tc) {
		p.tunnels.Delete(tc)
		p.release(h)
		tc.Close()
	}
}

// hijack takes over a CONNECT's connection and answers it 200; bytes the
// client sent already (its TLS hello) are read first. When the 200
// cannot be written, the connection is closed and the error returned.
func hijack(w http.ResponseWriter) (net.Conn, error) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		capability.Refuse(capability.ReasonInternal, "The proxy could not take over the connection.").Write(w)
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err = rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err == nil {
		err = rw.Flush()
	}
	if err != nil {
		// The client is gone: the tunnel is not opened.
		conn.Close()
		return nil, err
	}
	if rw.Reader.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: rw.Reader}, nil
	}
	return conn, nil
}

// bufferedConn reads what the server buffered before the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// serveTunnel serves one request of an intercepted tunnel.
func (p *Proxy) serveTunnel(w http.ResponseWriter, r *http.Request) {
	h, _ := r.Context().Value(tunnelKey{}).(*held)
	if h == nil {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInternal, "The proxy lost this tunnel."), p.cfg.Now(), RouteTunnel)
		return
	}
	t := h.tunnel()
	if !sameHost(r.Host, t.to) {
		p.refuse(w, r, t, capability.Refuse(capability.ReasonHost, "This tunnel was opened to %s; the proxy serves in it only requests for that host, and this request names a Host other than the tunnel's.", t.to.addr()),
			p.cfg.Now(), RouteTunnel)
		return
	}
	p.forward(w, r, t, false)
}

// plain serves a plain-HTTP request in absolute form.
func (p *Proxy) plain(w http.ResponseWriter, r *http.Request) {
	start := p.cfg.Now()
	if r.URL.Scheme != "http" {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInvalid, "The proxy takes https:// through CONNECT; a request in absolute form must be http://."), start, RouteTunnel)
		return
	}
	to, ok := parseTarget("http", net.JoinHostPort(r.URL.Hostname(), cmp.Or(r.URL.Port(), "80")))
	if !ok || !sameHost(r.Host, to) {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInvalid, "The request's Host is not its URL's host."), start, RouteTunnel)
		return
	}
	t, _, err := p.judge(r.Context(), token.FromProxyAuthorization(r.Header), p.cfg.Broker.Source(r), to, true)
	if err != nil {
		p.refuse(w, r, t, err, start, RouteTunnel)
		return
	}
	p.forward(w, r, t, true)
}

// sameHost reports whether a request's Host names to (its port, when
// left out, the scheme's default), as hostName compares names.
func sameHost(host string, to target) bool {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), defaultPort(to.scheme)
	}
	return hostName(h) == to.host && port == to.port
}

// forward hands r to the broker as /egress/NAME/<path>, NAME the
// tunnel's declared secret, still pinned to its host, whose base path
// r's path is under (the longest); counted says judge counted r against
// the box's rate already (a plain request).
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t *tunnel, counted bool) {
	ctx := r.Context()
	path := r.URL.EscapedPath()
	name, tail := "", ""
	best := -1
	for _, n := range t.names {
		sec, err := p.cfg.Cache.SecretOfToken(ctx, t.box, t.tokenHash, n)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			p.refuse(w, r, t, capability.Unavailable(err), p.cfg.Now(), RouteTunnel)
			return
		}
		if err != nil || !pinnedTo(sec.Host, t.to) {
			continue
		}
		base, _ := protocol.ParseSecretHost(sec.Host)
		prefix := base.EscapedPath()
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok || rest != "" && !strings.HasPrefix(rest, "/") || len(prefix) <= best {
			continue
		}
		name, tail, best = n, rest, len(prefix)
	}
	if name == "" {
		p.refuse(w, r, t, capability.Refuse(capability.ReasonNoSecret, "No secret of this box that its egress entry lists (%s) is pinned to %s with a base path this request's path is under.", strings.Join(t.names, ", "), t.to.addr()),
			p.cfg.Now(), RouteTunnel)
		return
	}
	u, err := url.ParseRequestURI(protocol.PrefixEgress + "/" + name + tail)
	if err != nil {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInvalid, "The request's path is not one the proxy can forward."), p.cfg.Now(), RouteTunnel)
		return
	}
	u.RawQuery = r.URL.RawQuery
	// The client asked the host's own URL: links in the answer keep
	// naming it, and following them comes back through the proxy.
	in := r.Clone(egress.InTunnel(ctx))
	in.URL = u
	in.RequestURI = u.RequestURI()
	in.Header.Del("Proxy-Authorization")
	in.Header.Del("Proxy-Connection")
	p.cfg.Broker.ServeHandoff(w, in, broker.Handoff{Token: t.token, From: t.from, Label: RoutePrefix, Counted: counted})
}
