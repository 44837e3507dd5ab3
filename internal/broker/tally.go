package broker

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
)

// DefaultTallyEvery is how often the tallies of refusals made before a
// box was known are written out when Config.TallyEvery is zero.
const DefaultTallyEvery = time.Minute

// maxTallySources bounds the sources (with the reasons their requests
// were refused for) tallied apart within one window; refusals from any
// further source are tallied under TallyOther.
const maxTallySources = 4096

// TallyOther is the source under which refusals are tallied once
// maxTallySources sources are tallied in a window.
const TallyOther = "other"

// Tally is what the broker keeps, in aggregate, of the requests from one
// source that were refused for one reason before any box was known (no
// box's token, a path no route serves, a method the route does not take,
// ...), over one window: every such refusal but the window's first from
// that source for that reason, which is logged and recorded on its own.
// So a client sending requests with no box's token costs at most two log
// lines and two audit rows a window for each reason it is refused for
// (a few), however fast it sends.
type Tally struct {
	// Source is the IP address the requests came from: the connection's
	// remote address (behind a load balancer, the balancer's), or
	// TallyOther.
	Source string
	// Reason is why every refusal tallied was refused (a
	// capability.Reason...).
	Reason string
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

// tallyKey is what refusals are tallied apart by.
type tallyKey struct{ source, reason string }

// tally keeps the refusals made before a box was known in the current
// window, by source and reason.
type tally struct {
	mu sync.Mutex // guards seen
	// seen holds every source and reason refused in this window; its
	// Tally counts the refusals after the first.
	seen map[tallyKey]*Tally
}

// add notes a refusal from source, made for reason before a box was
// known, and reports whether it is tallied (true) or the window's first
// from source for reason, to be logged and recorded on its own (false).
func (t *tally) add(source, reason string, at time.Time, method, route, capability string, status int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[tallyKey]*Tally{}
	}
	k := tallyKey{source, reason}
	e, ok := t.seen[k]
	if !ok && len(t.seen) >= maxTallySources {
		// Too many sources this window: the rest are tallied together,
		// by reason, from their first refusal.
		other := tallyKey{TallyOther, reason}
		if e, ok = t.seen[other], true; e == nil {
			e = &Tally{Source: TallyOther, Reason: reason}
			t.seen[other] = e
		}
	}
	if !ok {
		t.seen[k] = &Tally{Source: source, Reason: reason}
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

// Run writes out the tallies of refusals made before a box was known
// every Config.TallyEvery until ctx ends, and once more then.
func (s *Server) Run(ctx context.Context) {
	every := s.cfg.TallyEvery
	defaults.Positive(&every, DefaultTallyEvery)
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

// FlushTally ends the current window of refusals made before a box was
// known: it logs one line for each source and reason whose refusals were
// tallied ("token refusals" for those that carried no box's token) and
// keeps one audit entry for each (keepTally). A source's next refusal for the
// reason is then logged and recorded on its own again.
func (s *Server) FlushTally() {
	for _, t := range s.tally.take() {
		msg := "refusals before a box was known"
		if t.Reason == capability.ReasonToken {
			msg = "token refusals"
		}
		s.log.LogAttrs(context.Background(), slog.LevelInfo, msg,
			slog.String("source", t.Source), slog.Int("count", t.Count),
			slog.Time("from", t.From), slog.Time("to", t.To),
			slog.String("method", t.Method), slog.String("route", t.Route),
			slog.String("capability", t.Capability), slog.Int("status", t.Status), slog.String("reason", t.Reason))
		s.keepTally(&t)
	}
}
