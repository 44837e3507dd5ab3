package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// servePassthrough serves a passthrough tunnel, which connect hands to
// the broker: the broker holds it within its box's rate and concurrency
// bounds (a tunnel is one request, in flight until it ends) and records
// it as it ends. It connects to the target and copies bytes both ways,
// untouched, until either side ends or the tunnel is idle for
// IdleTimeout.
func (p *Proxy) servePassthrough(w http.ResponseWriter, r *http.Request, h *held) (broker.TunnelEnd, error) {
	t := h.t
	var up net.Conn
	var err error
	if t.approved {
		if up, err = p.dialApproved(r.Context(), t.to); err != nil {
			return broker.TunnelEnd{}, err
		}
	} else if up, err = p.cfg.Dial(r.Context(), "tcp", t.to.addr()); err != nil {
		p.log.Warn("proxy: passthrough dial", "addr", t.to.addr(), "err", err)
		return broker.TunnelEnd{}, capability.Refuse(capability.ReasonUpstreamFailed, "%s", "The passthrough host "+t.to.addr()+" could not be reached.")
	}
	end := broker.TunnelEnd{Message: "tunnelled untouched to " + t.to.addr()}
	conn, err := hijack(w)
	if err != nil {
		up.Close()
		return end, nil
	}
	if !h.attach(conn, up) {
		return end, nil // closed by the re-check as it was opened
	}
	// net/http does not close a hijacked connection as the proxy stops;
	// the request's context ends then.
	stop := context.AfterFunc(r.Context(), func() { conn.Close(); up.Close() })
	defer stop()
	gate := &helloGate{Conn: conn, host: t.to.host}
	end.Bytes = splice(gate, up, p.cfg.IdleTimeout)
	if gate.refused {
		end.Reason = capability.ReasonHost
		end.Message += "; closed by the broker: the client's TLS server name was not " + t.to.host
	} else if why := h.why(); why != "" {
		end.Reason = capability.ReasonClosed
		end.Message += "; closed by the broker: " + why
	}
	return end, nil
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
	names  []string   // guarded by mu: the secrets it reaches, as last judged
}

// tunnel is h's tunnel with the declared secrets pinned to its target
// as the last judgement of it found them: a secret pinned there and
// declared after the CONNECT is used in it from the next re-check on.
// (One taken away is refused at once: forward reads each again.)
func (h *held) tunnel() *tunnel {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := *h.t
	t.names = h.names
	return &t
}

// rejudged keeps names, the secrets the re-check found h reaches.
func (h *held) rejudged(names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names = names
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
	h := &held{t: t, pass: pass, names: t.names}
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

// refreshCA reads the CA again, to follow a rotation, and logs its
// Warning, if any, once a day (warned is when it last did).
func (p *Proxy) refreshCA(ctx context.Context, warned *time.Time) {
	if err := p.cfg.CA.Refresh(ctx); err != nil && ctx.Err() == nil {
		p.log.Warn("proxy: read the CA again", "err", err)
	}
	if w := p.cfg.CA.Warning(); w != "" && p.cfg.Now().Sub(*warned) >= 24*time.Hour {
		p.log.Warn("proxy: " + w)
		*warned = p.cfg.Now()
	}
}

// every runs f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}

// recheck judges every open tunnel again, once for each box token and
// target (through the cache, and one listing of the box's secrets), and
// closes those whose CONNECT would now be refused; those it keeps open
// reach the secrets it finds pinned to their target now. A group whose store
// cannot be read closes nothing (its tunnels are judged again at the
// next tick) and keeps no other group from being judged.
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
		t, pass, err := p.judge(ctx, k.token, k.from, k.to, false)
		var e *capability.Error
		if err != nil && (!errors.As(err, &e) || e.Status == http.StatusServiceUnavailable) {
			p.log.Warn("proxy: judge open tunnels again", "box", hs[0].t.box, "addr", k.to.addr(), "err", err)
			continue
		}
		if e == nil && pass == hs[0].pass {
			for _, h := range hs {
				h.rejudged(t.names)
			}
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
			if u, err := protocol.ParseSecretHost(s.Host); err == nil && hosts[hostName(u.Hostname())] != nil {
				h := hostName(u.Hostname())
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
