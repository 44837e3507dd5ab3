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
//     later) with a leaf certificate for the host from its CA (CA, in
//     ca.go), and serves the tunnel's requests with net/http, HTTP/1.1
//     or HTTP/2 as the client offers through ALPN.
//   - Each request in the tunnel whose Host is the CONNECT's host is
//     handed, in process, to the broker's own handler as
//     /egress/NAME/<path> (NAME the declared secret pinned there whose
//     base path the request's path is under), marked with
//     broker.WithProxied: the broker authenticates it by the proxy's
//     token, applies the rule, the pause and the box's rate and
//     concurrency bounds, and egress swaps the token for the value,
//     sends it to the secret's host over verified TLS, keeps the value
//     out of the answer, and audits it (its route is "proxy /egress/*").
//     Budgets do not apply to egress.
//   - Idle tunnels and idle connections time out.
//
// The CA's key never leaves the broker: it is sealed at rest, shared by
// replicas through the store, and never printed.
package egressproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
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
	"github.com/intentius/boxbroker/internal/protocol"
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

// Route labels of what the proxy answers itself, in logs, metrics and
// the audit log; requests in an intercepted tunnel are labelled by the
// broker ("proxy /egress/*").
const (
	RouteConnect     = broker.ProxiedRoutePrefix + "CONNECT"
	RoutePassthrough = broker.ProxiedRoutePrefix + "passthrough"
	// RouteTunnel labels a request in an intercepted tunnel that the
	// proxy refuses before the broker sees it.
	RouteTunnel = broker.ProxiedRoutePrefix + protocol.PrefixEgress + "/*"
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
	CA *CA
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
}

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
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.CARefresh <= 0 {
		cfg.CARefresh = DefaultCARefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: DefaultDialTimeout}
		cfg.Dial = d.DialContext
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, passthrough: pass, conns: newConnListener(), open: map[string]map[*held]struct{}{}}
	p.inner = &http.Server{
		Handler:           http.HandlerFunc(p.serveTunnel),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if h, ok := p.tunnels.Load(c); ok {
				return context.WithValue(ctx, tunnelKey{}, h.(*held).t)
			}
			return ctx
		},
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				if h, ok := p.tunnels.LoadAndDelete(c); ok {
					p.release(h.(*held))
				}
			}
		},
	}
	return p, nil
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
	if host == "" || strings.ContainsAny(host, "/@ :[]") && net.ParseIP(host) == nil || err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("proxy passthrough %q is not a host or host:port", s)
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

// Handler returns the listener's handler, for an http.Server of the
// caller's own (Serve makes one).
func (p *Proxy) Handler() http.Handler { return http.HandlerFunc(p.serveProxy) }

// Serve serves the proxy on ln until ctx ends; then it closes every
// tunnel and connection and returns. Intercepted tunnels' requests run
// on the broker's handler, so in-flight ones end with ctx too. While it
// serves, every open tunnel is judged again every Recheck, and the CA
// read again every CARefresh.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	outer := &http.Server{
		Handler:           p.Handler(),
		ReadHeaderTimeout: p.cfg.ReadHeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    p.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	p.inner.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 2)
	go func() { errc <- outer.Serve(ln) }()
	go func() { errc <- p.inner.Serve(p.conns) }()
	rctx, stopRecheck := context.WithCancel(ctx)
	defer stopRecheck()
	go p.recheckEvery(rctx)
	go p.refreshCA(rctx)
	var first error
	select {
	case first = <-errc:
	case <-ctx.Done():
	}
	outer.Close()
	p.inner.Close()
	second := <-errc
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
	// from is where the box sent its CONNECT from (broker.Source), by
	// which its token's binding is judged for the tunnel's life.
	from  netip.Addr
	to    target
	names []string
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

// admit authenticates r's box by its Proxy-Authorization and applies the
// rule for to; it returns the tunnel, passthrough true for a host on the
// passthrough list, or the refusal (with the tunnel, when the box is
// known).
func (p *Proxy) admit(r *http.Request, to target) (t *tunnel, passthrough bool, err error) {
	return p.judge(r.Context(), token.FromProxyAuthorization(r.Header), p.cfg.Broker.Source(r), to)
}

// judge applies the rule for to to the box whose token is tok, as admit
// does for a CONNECT and the re-check for an open tunnel. The broker
// admits the box (its token, its pause, its report); the proxy chooses
// the words: the names of the box's secrets pinned to to, of which the
// box's report must declare at least one.
func (p *Proxy) judge(ctx context.Context, tok string, from netip.Addr, to target) (t *tunnel, passthrough bool, err error) {
	adm, err := p.cfg.Broker.AdmitBox(broker.WithSource(ctx, from), tok, protocol.Egress)
	if token.Refused(err) {
		msg := "The proxy needs the box's token in Proxy-Authorization: set HTTPS_PROXY=http://box:<token>@<this address> (Basic, any user, the token as the password), or send Proxy-Authorization: Bearer <token>."
		if tok != "" {
			msg = "The token in Proxy-Authorization is no box's token at this broker."
		}
		e := capability.Refuse(capability.ReasonToken, "%s", msg).At(http.StatusProxyAuthRequired)
		e.Header = http.Header{"Proxy-Authenticate": {`Basic realm="boxbroker egress proxy"`}}
		return nil, false, e
	}
	if adm != nil {
		t = &tunnel{box: adm.Box.Name, token: tok, from: from, to: to}
	}
	if err != nil {
		return t, false, err
	}
	secs, err := p.cfg.Secrets.ListSecrets(ctx, adm.Box.Name)
	if err != nil {
		return t, false, capability.Unavailable(err)
	}
	if to.scheme == "https" && p.passthrough[to.addr()] {
		return t, true, p.judgePassthrough(adm, secs, to)
	}
	var pinned []string
	for _, s := range secs {
		if pinnedTo(s.Host, to) {
			pinned = append(pinned, s.Name)
		}
	}
	where := to.scheme + "://" + to.addr()
	if len(pinned) == 0 {
		refusal := capability.Refuse(capability.ReasonNoSecret, "No egress secret of this box is pinned to %s, so the broker's proxy does not reach it: egress goes only to a host a secret is pinned to, by its exact host and port; its owner pins one with `boxbroker secret set %s NAME --host %s`.",
			where, adm.Box.Name, where)
		approved, words := p.ask(ctx, adm.Box.Name, tok, to, refusal.Message)
		if approved {
			// Approved: a passthrough tunnel, on the passthrough rule
			// (no secret of the box pinned to the host, on any port).
			return t, true, p.judgePassthrough(adm, secs, to)
		}
		refusal.Message += words
		return t, false, refusal
	}
	for _, name := range pinned {
		if adm.Refusal(name) == nil {
			t.names = append(t.names, name)
		}
	}
	if len(t.names) == 0 {
		return t, false, capability.Refuse(capability.ReasonDeclaration, "The proxy reaches %s through egress with the scope word of a secret pinned there (%s), and this box declares none of them. %s",
			where, strings.Join(pinned, ", "), adm.Refusal(pinned[0]).Message)
	}
	return t, false, nil
}

// ask reports whether an approval in force lets box's CONNECT to to, a
// host with no secret and no passthrough entry, through as passthrough,
// and otherwise the words its refusal adds when the box's owner asks
// about unknown hosts. Only https targets are asked about; a store that
// fails leaves the CONNECT refused (logged).
func (p *Proxy) ask(ctx context.Context, box, tok string, to target, reason string) (bool, string) {
	if p.cfg.Approvals == nil || to.scheme != "https" {
		return false, ""
	}
	v, err := p.cfg.Approvals.Refused(ctx, approval.Attempt{Box: box, Kind: store.ProposalHost, Method: http.MethodConnect, Host: to.addr(),
		Reason: reason, Forbidden: []string{tok}})
	if err != nil {
		p.log.Warn("proxy: approvals unreadable; the CONNECT stays refused", "box", box, "addr", to.addr(), "err", err)
		return false, ""
	}
	return v.Approved, p.cfg.Approvals.Words(v)
}

// judgePassthrough applies the rule for a passthrough host to box, whose
// secrets are secs: its report must declare egress, and no secret of it
// may be pinned to the host, on any port (a host's state may well be
// shared by its ports). The broker does not read a passthrough tunnel,
// so what it wrote to a secret's host for the box (the value, a token it
// minted, a signature) could come back through one unredacted.
func (p *Proxy) judgePassthrough(adm *broker.Admission, secs []store.Secret, to target) error {
	d := adm.Report
	if d == nil {
		return capability.Refuse(capability.ReasonDeclaration, "The broker has no declaration from this box yet, so it brokers nothing for it, and its proxy tunnels nothing: a tunnel to %s needs an egress entry brokered by %s in the box block of its chant.workspace.json, reported to %s.",
			to.addr(), p.cfg.BrokerWord, protocol.RouteDeclaration)
	}
	if d.Find(protocol.Egress, p.cfg.BrokerWord) == nil {
		return capability.Refuse(capability.ReasonDeclaration, "This box declares no egress capability brokered by %s, so the broker's proxy tunnels nothing for it, not even to %s. Add an egress entry brokered by %s to the box block in its chant.workspace.json.",
			p.cfg.BrokerWord, to.addr(), p.cfg.BrokerWord)
	}
	var pinned []string
	for _, s := range secs {
		if u, err := protocol.ParseSecretHost(s.Host); err == nil && strings.EqualFold(u.Hostname(), to.host) {
			pinned = append(pinned, s.Name)
		}
	}
	if len(pinned) > 0 {
		return capability.Refuse(capability.ReasonPassthrough, "%s is on the broker's passthrough list (--proxy-passthrough), and this box's secret %s is pinned to %s: the broker does not read a passthrough tunnel, so it could not keep out of it what it wrote there for this box (a secret's value, a token it minted), and it opens none. Its operator takes %s off --proxy-passthrough, so the proxy reaches it through egress, or pins the secret elsewhere.",
			to.addr(), strings.Join(pinned, ", "), to.host, to.host)
	}
	return nil
}

// pinnedTo reports whether the secret host base names exactly to's
// scheme, host and port.
func pinnedTo(base string, to target) bool {
	u, err := protocol.ParseSecretHost(base)
	if err != nil || u.Scheme != to.scheme {
		return false
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	return strings.EqualFold(u.Hostname(), to.host) && port == to.port
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// parseTarget reads a CONNECT's authority: host:port, the port given.
func parseTarget(scheme, authority string) (target, bool) {
	host, port, err := net.SplitHostPort(authority)
	if err != nil || host == "" || len(host) > maxHost {
		return target{}, false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return target{}, false
	}
	return target{scheme: scheme, host: strings.ToLower(host), port: port}, true
}

// refuse answers r with the refusal err through the broker's writer
// (broker.Refuse), which records it when t, the tunnel, names a box.
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
	t, passthrough, err := p.admit(r, to)
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
		p.passthroughTunnel(w, r, h, start)
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
	t, _ := r.Context().Value(tunnelKey{}).(*tunnel)
	if t == nil {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInternal, "The proxy lost this tunnel."), p.cfg.Now(), RouteTunnel)
		return
	}
	if !sameHost(r.Host, t.to) {
		p.refuse(w, r, t, capability.Refuse(capability.ReasonHost, "This tunnel was opened to %s; the proxy serves in it only requests for that host, and this request names a Host other than the tunnel's.", t.to.addr()),
			p.cfg.Now(), RouteTunnel)
		return
	}
	p.forward(w, r, t)
}

// plain serves a plain-HTTP request in absolute form.
func (p *Proxy) plain(w http.ResponseWriter, r *http.Request) {
	start := p.cfg.Now()
	if r.URL.Scheme != "http" {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInvalid, "The proxy takes https:// through CONNECT; a request in absolute form must be http://."), start, RouteTunnel)
		return
	}
	port := r.URL.Port()
	if port == "" {
		port = "80"
	}
	to, ok := parseTarget("http", net.JoinHostPort(r.URL.Hostname(), port))
	if !ok || !sameHost(r.Host, to) {
		p.refuse(w, r, nil, capability.Refuse(capability.ReasonInvalid, "The request's Host is not its URL's host."), start, RouteTunnel)
		return
	}
	t, _, err := p.admit(r, to)
	if err != nil {
		p.refuse(w, r, t, err, start, RouteTunnel)
		return
	}
	p.forward(w, r, t)
}

// sameHost reports whether a request's Host names to (its port, when
// left out, the scheme's default).
func sameHost(host string, to target) bool {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), defaultPort(to.scheme)
	}
	return strings.EqualFold(h, to.host) && port == to.port
}

// forward hands r to the broker as /egress/NAME/<path>, NAME the
// tunnel's declared secret, still pinned to its host, whose base path
// r's path is under (the longest).
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t *tunnel) {
	ctx := r.Context()
	path := r.URL.EscapedPath()
	name, tail := "", ""
	best := -1
	for _, n := range t.names {
		sec, err := p.cfg.Cache.Secret(ctx, t.box, n)
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
	in := r.Clone(broker.WithSource(broker.WithProxied(ctx, t.token), t.from))
	in.URL = u
	in.RequestURI = u.RequestURI()
	in.Header.Del("Proxy-Authorization")
	in.Header.Del("Proxy-Connection")
	p.cfg.Broker.ServeHTTP(w, in)
}

// passthroughTunnel connects to the target and copies bytes both ways,
// untouched, until either side ends or the tunnel is idle for
// IdleTimeout; the audit log records it as it ends.
func (p *Proxy) passthroughTunnel(w http.ResponseWriter, r *http.Request, h *held, start time.Time) {
	t := h.t
	rec := &broker.Record{At: start, Method: r.Method, Route: RoutePassthrough, Box: t.box, Capability: protocol.Egress,
		Status: http.StatusOK, Message: "tunnelled untouched to " + t.to.addr()}
	// The box's rate and concurrency bounds hold for a tunnel as for a
	// request: it is one request, in flight until it ends.
	release, err := p.cfg.Broker.Acquire(t.box)
	if err != nil {
		p.refuse(w, r, t, err, start, RoutePassthrough)
		return
	}
	defer release()
	up, err := p.cfg.Dial(r.Context(), "tcp", t.to.addr())
	if err != nil {
		p.log.Warn("proxy: passthrough dial", "addr", t.to.addr(), "err", err)
		p.refuse(w, r, t, capability.Refuse(capability.ReasonUpstreamFailed, "%s", "The passthrough host "+t.to.addr()+" could not be reached."), start, RoutePassthrough)
		return
	}
	conn, err := hijack(w)
	if err != nil {
		up.Close()
		return
	}
	if !h.attach(conn, up) {
		return // closed by the re-check as it was opened
	}
	// net/http does not close a hijacked connection as the proxy stops;
	// the request's context ends then.
	stop := context.AfterFunc(r.Context(), func() { conn.Close(); up.Close() })
	defer stop()
	n := splice(conn, up, p.cfg.IdleTimeout)
	rec.Bytes = n
	rec.Duration = p.cfg.Now().Sub(start)
	if why := h.why(); why != "" {
		rec.Reason = capability.ReasonClosed
		rec.Message += "; closed by the broker: " + why
	}
	p.cfg.Broker.Observe(rec)
}

// held is a tunnel the proxy holds open: counted against its box's
// MaxTunnels, judged again every Recheck, and closed by closing its
// connections once its box may no longer have it.
type held struct {
	t    *tunnel
	pass bool

	mu     sync.Mutex
	conns  []net.Conn // guarded by mu: what closing the tunnel closes
	closed string     // guarded by mu: why the proxy closed it; "" while open
}

// attach adds conns to what closing h closes; when h is closed already
// it closes them and reports false.
func (h *held) attach(conns ...net.Conn) bool {
	h.mu.Lock()
	closed := h.closed != ""
	if !closed {
		h.conns = append(h.conns, conns...)
	}
	h.mu.Unlock()
	if closed {
		for _, c := range conns {
			c.Close()
		}
	}
	return !closed
}

// close closes h's connections, raw (a tls.Conn's Close may wait on a
// write in progress), and keeps why.
func (h *held) close(why string) {
	h.mu.Lock()
	var conns []net.Conn
	if h.closed == "" {
		h.closed, conns = why, h.conns
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// why is why the proxy closed h, or "".
func (h *held) why() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// hold counts a tunnel for t against its box's MaxTunnels, or returns
// the 429 refusal past it. The caller releases it when it ends.
func (p *Proxy) hold(t *tunnel, pass bool) (*held, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := p.open[t.box]
	if n := len(set); p.cfg.MaxTunnels > 0 && n >= p.cfg.MaxTunnels {
		return nil, capability.Refuse(capability.ReasonLimit, "This box holds %d tunnels open through the broker's proxy, as many as it may (the box's concurrency bound, --box-concurrent); one must end, or idle out, before it opens another.", n)
	}
	if set == nil {
		set = map[*held]struct{}{}
		p.open[t.box] = set
	}
	h := &held{t: t, pass: pass}
	set[h] = struct{}{}
	return h, nil
}

// release stops counting h.
func (p *Proxy) release(h *held) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if set := p.open[h.t.box]; set != nil {
		delete(set, h)
		if len(set) == 0 {
			delete(p.open, h.t.box)
		}
	}
}

// refreshCA reads the CA again every CARefresh until ctx ends, and logs
// its Warning, if any, once a day.
func (p *Proxy) refreshCA(ctx context.Context) {
	tick := time.NewTicker(p.cfg.CARefresh)
	defer tick.Stop()
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := p.cfg.CA.Refresh(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("proxy: read the CA again", "err", err)
			}
			if w := p.cfg.CA.Warning(); w != "" && p.cfg.Now().Sub(warned) >= 24*time.Hour {
				p.log.Warn("proxy: " + w)
				warned = p.cfg.Now()
			}
		}
	}
}

// recheckEvery runs recheck every Recheck until ctx ends.
func (p *Proxy) recheckEvery(ctx context.Context) {
	tick := time.NewTicker(p.cfg.Recheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			p.recheck(ctx)
		}
	}
}

// recheck judges every open tunnel again, once for each box token and
// target (through the cache, and one listing of the box's secrets), and
// closes those whose CONNECT would now be refused. A store that cannot
// be read closes nothing: the tunnels are judged again at the next
// tick.
func (p *Proxy) recheck(ctx context.Context) {
	type key struct {
		token string
		from  netip.Addr
		to    target
	}
	groups := map[key][]*held{}
	p.mu.Lock()
	for _, set := range p.open {
		for h := range set {
			k := key{h.t.token, h.t.from, h.t.to}
			groups[k] = append(groups[k], h)
		}
	}
	p.mu.Unlock()
	for k, hs := range groups {
		_, pass, err := p.judge(ctx, k.token, k.from, k.to)
		var e *capability.Error
		if err != nil && (!errors.As(err, &e) || e.Status == http.StatusServiceUnavailable) {
			p.log.Warn("proxy: judge open tunnels again", "err", err)
			return
		}
		if e == nil && pass == hs[0].pass {
			continue
		}
		why, reason := "its box may no longer reach "+k.to.addr(), "rule"
		if e != nil {
			why, reason = e.Message, e.Reason
		}
		for _, h := range hs {
			if h.why() == "" {
				p.log.Info("proxy: tunnel closed", "box", h.t.box, "addr", k.to.addr(), "passthrough", h.pass, "reason", reason)
			}
			h.close(why)
		}
	}
}

// splice copies a→b and b→a until either ends or neither carries a byte
// for idle; it closes both and returns the bytes carried to a.
func splice(a, b net.Conn, idle time.Duration) int64 {
	var toA int64
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn, n *int64) {
		buf := make([]byte, 32<<10)
		for {
			_ = src.SetReadDeadline(time.Now().Add(idle))
			k, err := src.Read(buf)
			if k > 0 {
				_ = dst.SetWriteDeadline(time.Now().Add(idle))
				if _, werr := dst.Write(buf[:k]); werr != nil {
					break
				}
				if n != nil {
					*n += int64(k)
				}
			}
			if err != nil {
				break
			}
		}
		a.Close()
		b.Close()
		done <- struct{}{}
	}
	go cp(b, a, nil)
	go cp(a, b, &toA)
	<-done
	<-done
	return toA
}

// connListener is a net.Listener fed with intercepted connections.
type connListener struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), closed: make(chan struct{})}
}

// put hands c to the inner server; false once the listener is closed.
func (l *connListener) put(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

var _ io.Closer = (*connListener)(nil)

// PassthroughHeld reports the passthrough entries (as ParsePassthrough
// reads them) that a secret in st is pinned to, host alike on any port,
// at the moment it reads: each as "host:port (box/NAME, ...)". The proxy
// refuses those boxes a tunnel there, judged at each CONNECT and again
// while it is open; serve says so as it starts.
func PassthroughHeld(ctx context.Context, st interface {
	store.Boxes
	store.Secrets
}, pass []string) ([]string, error) {
	hosts := map[string][]string{} // host → its entries
	var order []string
	for _, e := range pass {
		hp, err := ParsePassthrough(e)
		if err != nil {
			return nil, err
		}
		h, _, _ := net.SplitHostPort(hp)
		if len(hosts[h]) == 0 {
			order = append(order, h)
		}
		hosts[h] = append(hosts[h], hp)
	}
	if len(hosts) == 0 {
		return nil, nil
	}
	boxes, err := st.ListBoxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list boxes: %w", err)
	}
	by := map[string][]string{} // host → box/NAME
	for _, b := range boxes {
		secs, err := st.ListSecrets(ctx, b.Name)
		if err != nil {
			return nil, fmt.Errorf("list secrets of %s: %w", b.Name, err)
		}
		for _, s := range secs {
			u, err := protocol.ParseSecretHost(s.Host)
			if err != nil {
				continue
			}
			if h := strings.ToLower(u.Hostname()); hosts[h] != nil {
				by[h] = append(by[h], b.Name+"/"+s.Name)
			}
		}
	}
	var out []string
	for _, h := range order {
		if len(by[h]) > 0 {
			out = append(out, fmt.Sprintf("%s (%s)", strings.Join(hosts[h], ", "), strings.Join(by[h], ", ")))
		}
	}
	return out, nil
}
