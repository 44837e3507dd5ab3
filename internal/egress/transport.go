package egress

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"syscall"
	"time"

	"github.com/intentius/boxbroker/internal/proxy"
)

// Errors of the outbound guard. The box sees the refusal the error
// handler maps them to, never their text.
var (
	// errElsewhere: a request or a connection for somewhere other than
	// the secret's host. Building the URL from the secret's base makes it
	// unreachable; the guard is the second lock.
	errElsewhere = errors.New("egress: outbound request is not for the secret's host")
	// errTokenLeft: the box's token is still in the outbound request in
	// a form the broker does not swap.
	errTokenLeft = errors.New("egress: the box's token is still in the outbound request")
	// errAddress: the secret's host names a host whose name, looked up as
	// the connection is made, is at an address it is never reached at by
	// a name (see reachable).
	errAddress = errors.New("egress: the secret's host is at an address the broker reaches only when the secret names it")
)

// Bounds of egress's own pools.
const (
	// maxPools bounds how many pools (one per box and secret) egress
	// keeps at once; beyond it the least recently used is dropped.
	maxPools = 1024
	// poolIdle is how long a pool may go unused before it is dropped: the
	// transport's IdleConnTimeout, after which it holds no idle
	// connection anyway.
	poolIdle = 90 * time.Second
)

// pools is the RoundTripper egress uses when none is injected: one
// transport, so one pool of connections per host, for each box and
// secret. No connection ever carries two boxes' requests, so whatever a
// host sends out of turn on a connection (an answer late, or one too
// many, after a request a box shaped to split in two) is read only as
// an answer to that box, for that secret. It keeps at most max pools,
// and none unused for longer than idle; a pool dropped has its idle
// connections closed at once, and a connection busy as it is dropped
// closes when it has been idle for the transport's IdleConnTimeout.
type pools struct {
	opts proxy.TransportOptions
	max  int
	idle time.Duration
	now  func() time.Time

	mu    sync.Mutex // guards lru and byKey
	lru   list.List  // of *pool, the most recently used first
	byKey map[poolKey]*list.Element
}

// poolKey names a pool: a box's, for one of its secrets.
type poolKey struct{ box, secret string }

// pool is one box's transport for one secret, and when it was last used.
type pool struct {
	key  poolKey
	t    *http.Transport
	used time.Time
}

func newPools(o proxy.TransportOptions) *pools {
	return &pools{opts: o, max: maxPools, idle: poolIdle, now: time.Now, byKey: make(map[poolKey]*list.Element)}
}

// RoundTrip sends req on the pool of its flight's box and secret.
func (p *pools) RoundTrip(req *http.Request) (*http.Response, error) {
	f := flightOf(req.Context())
	if f == nil || f.box == "" {
		return refuse(req, errElsewhere)
	}
	return p.get(poolKey{box: f.box, secret: f.name}).RoundTrip(req)
}

// get returns k's transport, made when k has none, and drops the pools
// over the bounds.
func (p *pools) get(k poolKey) *http.Transport {
	now := p.now()
	p.mu.Lock()
	var t *http.Transport
	if e, ok := p.byKey[k]; ok {
		pl := e.Value.(*pool)
		pl.used = now
		p.lru.MoveToFront(e)
		t = pl.t
	} else {
		t = newTransport(p.opts)
		p.byKey[k] = p.lru.PushFront(&pool{key: k, t: t, used: now})
	}
	dropped := p.reapLocked(now)
	p.mu.Unlock()
	for _, d := range dropped {
		d.CloseIdleConnections()
	}
	return t
}

// reapLocked removes the pools over max and those unused for longer
// than idle, the least recently used first, and returns their
// transports. The pool just used is at the front, and is never removed.
func (p *pools) reapLocked(now time.Time) []*http.Transport {
	var dropped []*http.Transport
	for e := p.lru.Back(); e != nil && e != p.lru.Front(); e = p.lru.Back() {
		pl := e.Value.(*pool)
		if p.lru.Len() <= p.max && now.Sub(pl.used) <= p.idle {
			break
		}
		p.lru.Remove(e)
		delete(p.byKey, pl.key)
		dropped = append(dropped, pl.t)
	}
	return dropped
}

// CloseIdleConnections closes every pool's idle connections.
func (p *pools) CloseIdleConnections() {
	p.mu.Lock()
	ts := make([]*http.Transport, 0, p.lru.Len())
	for e := p.lru.Front(); e != nil; e = e.Next() {
		ts = append(ts, e.Value.(*pool).t)
	}
	p.mu.Unlock()
	for _, t := range ts {
		t.CloseIdleConnections()
	}
}

// newTransport returns the transport of one of egress's pools:
// proxy.NewTransport's, whose dialer connects only to the host:port of
// the secret the request is for, and only at an address reachable
// allows: the dialer judges each address as it is about to connect to
// it, after the name is looked up, so the address judged is the address
// reached however the name's answers change between lookups.
func newTransport(o proxy.TransportOptions) *http.Transport {
	o.Control = reach
	t := proxy.NewTransport(o)
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if f := flightOf(ctx); f == nil || addr != f.addr {
			return nil, errElsewhere
		}
		return dial(ctx, network, addr)
	}
	return t
}

// reach is the dialer's check of address, an IP address and port a
// connection for ctx's flight is about to be made to.
func reach(ctx context.Context, _, address string, _ syscall.RawConn) error {
	f := flightOf(ctx)
	if f == nil {
		return errElsewhere
	}
	a, ok := proxy.ReachableAt(f.target.Hostname(), address)
	switch {
	case !a.IsValid():
		return errElsewhere
	case !ok:
		return fmt.Errorf("%w: %s is at %s", errAddress, f.target.Hostname(), a)
	}
	return nil
}

// guard is the outermost RoundTripper: it sends a request on only when it
// is for the secret's scheme and host and holds no trace of the box's
// token, and it swaps the value out of informational (1xx) answers, which
// the reverse proxy passes to the box before ModifyResponse runs.
type guard struct{ next http.RoundTripper }

// RoundTrip checks req and sends it on.
func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	f := flightOf(req.Context())
	if f == nil || req.URL.Scheme != f.target.Scheme || req.URL.Host != f.target.Host || req.Host != f.target.Host || req.URL.User != nil {
		return refuse(req, errElsewhere)
	}
	if carries(req, f.token) {
		return refuse(req, errTokenLeft)
	}
	if f.signErr != nil {
		return refuse(req, f.signErr)
	}
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.Got1xxResponse != nil {
		next := tr.Got1xxResponse
		tr.Got1xxResponse = func(code int, h textproto.MIMEHeader) error {
			f.set.RedactHeader(http.Header(h))
			return next(code, h)
		}
	}
	return g.next.RoundTrip(req)
}

// refuse closes req's body, as a RoundTripper that sends nothing must,
// and returns err.
func refuse(req *http.Request, err error) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, err
}
