package broker

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// DefaultTallyEvery is how often the tallies of token refusals are
// written out when Config.TallyEvery is zero.
const DefaultTallyEvery = time.Minute

// maxTallySources bounds the sources tallied apart within one window;
// refusals from any further source are tallied under TallyOther.
const maxTallySources = 4096

// TallyOther is the source under which refusals are tallied once
// maxTallySources sources are tallied in a window.
const TallyOther = "other"

// Tally is what the broker keeps, in aggregate, of the requests from one
// source that were refused because they carried no box's token, over one
// window: every such refusal but the window's first from that source,
// which is logged and recorded on its own. So a client sending bad tokens
// costs at most two log lines and two audit rows a window, however fast
// it sends.
type Tally struct {
	// Source is the IP address the requests came from: the connection's
	// remote address (behind a load balancer, the balancer's), or
	// TallyOther.
	Source string
	// From and To are when the first and the last refusal tallied arrived.
	From, To time.Time
	// Count is how many refusals are tallied.
	Count int
	// Method, Route and Capability are those of every refusal tallied,
	// or "*" where they differ.
	Method, Route, Capability string
	// Status is the last refusal's status.
	Status int
}

// tally keeps the token refusals of the current window by source.
type tally struct {
	mu sync.Mutex // guards seen
	// seen holds every source refused in this window; its Tally counts
	// the refusals after the first.
	seen map[string]*Tally
}

// add notes a token refusal from source and reports whether it is
// tallied (true) or the window's first from source, to be logged and
// recorded on its own (false).
func (t *tally) add(source string, at time.Time, method, route, capability string, status int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[string]*Tally{}
	}
	e, ok := t.seen[source]
	if !ok && len(t.seen) >= maxTallySources {
		// Too many sources this window: the rest are tallied together,
		// from their first refusal.
		if e, ok = t.seen[TallyOther], true; e == nil {
			e = &Tally{Source: TallyOther}
			t.seen[TallyOther] = e
		}
	}
	if !ok {
		t.seen[source] = &Tally{Source: source}
		return false
	}
	t.count(e, at, method, route, capability, status)
	return true
}

// count adds one refusal to e.
func (t *tally) count(e *Tally, at time.Time, method, route, capability string, status int) {
	if e.Count == 0 {
		e.From, e.Method, e.Route, e.Capability = at, method, route, capability
	}
	e.To, e.Status = at, status
	e.Count++
	e.Method = same(e.Method, method)
	e.Route = same(e.Route, route)
	e.Capability = same(e.Capability, capability)
}

func same(kept, v string) string {
	if kept == v {
		return kept
	}
	return "*"
}

// take ends the window: it returns the tallies that hold any refusal and
// forgets every source.
func (t *tally) take() []Tally {
	t.mu.Lock()
	seen := t.seen
	t.seen = nil
	t.mu.Unlock()
	var out []Tally
	for _, e := range seen {
		if e.Count > 0 {
			out = append(out, *e)
		}
	}
	return out
}

// sourceOf is the IP address r came from, as text; the remote address
// whole when it holds none.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().String()
	}
	return host
}

// Run writes out the tallies of token refusals every Config.TallyEvery
// until ctx ends, and once more then.
func (s *Server) Run(ctx context.Context) {
	every := s.cfg.TallyEvery
	if every <= 0 {
		every = DefaultTallyEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.FlushTally()
		case <-ctx.Done():
			s.FlushTally()
			return
		}
	}
}

// FlushTally ends the current window of token refusals: it logs one line
// for each source whose refusals were tallied and tells the Observer of
// its Tally. A source's next refusal is then logged and recorded on its
// own again.
func (s *Server) FlushTally() {
	for _, t := range s.tally.take() {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "token refusals",
			slog.String("source", t.Source), slog.Int("count", t.Count),
			slog.Time("from", t.From), slog.Time("to", t.To),
			slog.String("method", t.Method), slog.String("route", t.Route),
			slog.String("capability", t.Capability), slog.Int("status", t.Status))
		if s.cfg.Observer != nil {
			s.cfg.Observer.TokenRefusals(&t)
		}
	}
}
