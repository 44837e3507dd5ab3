package pool

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
)

// NeedsBody reports whether an answer of status is judged by its body:
// a 5xx other than 529, which is a refusal only when its error is an
// overloaded_error.
func NeedsBody(status int) bool {
	return status >= 500 && status <= 599 && status != 529
}

// answered notes what entry name answered box's call on route of model
// ("" when not known), and reports whether it was a refusal another
// entry may not give.
func (p *Pool) answered(name, box, route, model string, status int, hd http.Header, body []byte) bool {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.healthLocked(name)
	switch {
	case status == http.StatusTooManyRequests:
		h.R429++
		kind, reset := limitKind(hd)
		p.coolLocked(h, name, box, Limit(route, kind), limit{route: route}, hd, reset, now)
		return true
	case status == 529 || (NeedsBody(status) && overloaded(body)):
		// The box chose the model: the overload cools it alone until
		// another box's overlaps (see coolLocked).
		h.R529++
		model = overloadModelLocked(h, model, now)
		p.coolLocked(h, name, box, overloadKey(model), limit{over: true, model: model}, hd, time.Time{}, now)
		return true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Counted, and made again on the next entry, but the entry is
		// not failed here: a request can draw a 401 or 403 whatever
		// the key (a model, a beta, an organisation's setting), and a
		// box must not be able to fail the operator's entries one call
		// at a time. After a 401 the Choice probes the credential
		// (check), which no box can shape.
		h.Failures++
		return true
	case status >= 200 && status < 300:
		// Served: the entry is not overloaded for the model, and its
		// limits for the route have room, whatever they said before.
		for k, l := range h.limits {
			if l.applies(route, model) {
				delete(h.limits, k)
			}
		}
	}
	return false
}

// overloaded reports whether body is an Anthropic error of type
// overloaded_error.
func overloaded(body []byte) bool {
	var e struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Error.Type == protocol.TypeOverloaded
}

// State is an entry's state on this replica.
const (
	StateHealthy = "healthy"
	StateCooling = "cooling"
	StateFailed  = "failed"
)

// Stat is what this replica knows of one entry: its state and counts
// since the process began.
type Stat struct {
	Name      string
	Weight    int
	URL       string
	Kind      string // "API key" or "setup token"; "" when it cannot be opened
	UpdatedAt time.Time
	State     string
	Until     time.Time // when cooling or failed ends; zero when healthy
	// Cooling names what cools for every box while State is cooling: a
	// limit (Limit), or an overload ("overloaded/MODEL", "overloaded"
	// for calls whose model was not known).
	Cooling []string
	metrics.PoolCounts
}

// Stats returns every entry with this replica's state and counts, and
// its Kind.
func (p *Pool) Stats(ctx context.Context) ([]Stat, error) { return p.stats(ctx, true) }

// Health is Stats without Kind, which opens no sealed value: for a
// metrics scrape.
func (p *Pool) Health(ctx context.Context) ([]Stat, error) { return p.stats(ctx, false) }

func (p *Pool) stats(ctx context.Context, kinds bool) ([]Stat, error) {
	es, err := p.Entries(ctx)
	if err != nil {
		return nil, err
	}
	now := p.cfg.Now()
	out := make([]Stat, 0, len(es))
	for _, e := range es {
		s := Stat{Name: e.Name, Weight: e.Weight, URL: e.URL, UpdatedAt: e.UpdatedAt, State: StateHealthy}
		if kinds {
			if v, err := p.cfg.Keyring.Open(e.Sealed, AD(e.Name)); err == nil {
				s.Kind = Kind(v)
				secrets.Zero(v)
			}
		}
		p.mu.Lock()
		if h := p.health[e.Name]; h != nil {
			s.PoolCounts = h.PoolCounts
			for k, l := range h.limits {
				if now.Before(l.until) {
					s.Cooling = append(s.Cooling, k)
					s.Until = later(s.Until, l.until)
				}
			}
			sort.Strings(s.Cooling)
			if len(s.Cooling) > 0 {
				s.State = StateCooling
			}
			if h.failed && now.Before(h.failedUntil) {
				s.State, s.Until, s.Cooling = StateFailed, h.failedUntil, nil
			}
		}
		p.mu.Unlock()
		out = append(out, s)
	}
	return out, nil
}

// Kind says what a credential is, without any of it: an Anthropic API
// key or setup token, or a cloud account (Amazon Bedrock, Google Vertex
// AI).
func Kind(v []byte) string {
	if cloud.Is(v) {
		if c, err := cloud.Parse(v); err == nil {
			return cloud.Name(c.Kind)
		}
		return "cloud account"
	}
	if proxy.IsSetupToken(v) {
		return "setup token"
	}
	return "API key"
}
