package spend

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// Wrap returns c with its model calls metered and held to budgets. Name,
// Prefixes, Scopes and Route are c's.
func (m *Meter) Wrap(c capability.Metered) capability.Capability {
	return &metered{Capability: c, cap: c, m: m}
}

// metered is a capability whose model calls are metered.
type metered struct {
	capability.Capability
	cap capability.Metered
	m   *Meter
}

// estimated is what is known of a request before it is forwarded.
type estimated struct {
	Estimate
	// ok is false for a request that makes no model call.
	ok bool
	// later is true for a call estimated only as it settles, from its body
	// as it was forwarded (see bodyScan).
	later bool
	// limit is the most of the body its capability reads.
	limit int64
	// body, when not nil, is forwarded in place of the request's: the
	// estimate read the request's.
	body io.ReadCloser
}

// estimate estimates a request of box before it is forwarded. A body over
// what the capability reads is not read, and bounded by its length. A
// request the capability meters unread (a Messages call) from a box with
// no budget is not read either: nothing is reserved for it, and its body
// is read as it is forwarded. From a box that may have a budget, its body
// is read whole up to MaxBody, past the capability's own limit: an unread
// body's server tools and sources would go unseen, and the API could
// sample the model within it more often than any bound reserved for it.
// Any other body is read whole before it is forwarded, then forwarded
// unchanged.
func (c *metered) estimate(r *http.Request, box store.Box) (estimated, error) {
	limit, ok := c.cap.MeterBody(r)
	if !ok {
		return estimated{}, nil
	}
	unread := c.cap.Estimate(r, nil)
	if unread.Calls > 0 {
		if !c.m.budgeted(r.Context(), box.Name, box.CreatedAt) {
			if r.ContentLength > limit {
				return c.m.estimated(unread, r.ContentLength, nil), nil
			}
			return estimated{ok: true, later: true, limit: limit}, nil
		}
		limit = max(limit, c.m.cfg.MaxBody)
	}
	if n := r.ContentLength; n > limit {
		return c.m.estimated(unread, n, nil), nil
	}
	body, whole, rest, err := peek(r, limit)
	if err != nil {
		return estimated{}, err
	}
	if !whole { // no Content-Length, and over the limit
		return c.m.estimated(unread, c.m.cfg.MaxBody, rest), nil
	}
	return c.m.estimated(c.cap.Estimate(r, body), int64(len(body)), rest), nil
}

// estimated is the request estimated as e, from a body of n bytes, and
// forwarded with body in place of its own (nil: its own).
func (m *Meter) estimated(e capability.Estimate, n int64, body io.ReadCloser) estimated {
	if e.Calls <= 0 {
		return estimated{body: body}
	}
	return estimated{Estimate: EstimateOf(e, n, m.cfg.MaxTokens), ok: true, body: body}
}

// peek reads up to limit bytes of r's body, and returns what to read in
// its place: those bytes in front of the rest. whole is true when that
// was the whole body, which it returns.
func peek(r *http.Request, limit int64) (body []byte, whole bool, rest io.ReadCloser, err error) {
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, false, nil, capability.Refuse(capability.ReasonInvalid, "The request body could not be read.").WithErr(err)
	}
	rest = proxy.PutBack(buf, r.Body)
	if int64(len(buf)) <= limit {
		return buf, true, rest, nil
	}
	return nil, false, rest, nil
}

// Serve reserves the request's bound against its budgets (prepare),
// serves it with its upstream answers metered, and settles.
func (c *metered) Serve(w http.ResponseWriter, r *http.Request, call *capability.Call) error {
	mc, err := c.prepare(w, r, call)
	if err != nil {
		return err
	}
	if mc.tk != nil {
		// Deferred, so that a call the proxy aborts (the box went away
		// mid-stream) is settled too.
		defer c.m.settle(r.Context(), mc.s, mc.tk)
	}
	return c.Capability.Serve(w, mc.r, mc.call)
}

// meteredCall is a request ready to serve: the request and call to serve
// it with, and, when it is metered, what it settles. A metered call's
// parts are allocated with it, at once.
type meteredCall struct {
	r    *http.Request
	call *capability.Call
	s    settlement
	tk   *ticket // nil: not metered

	once   capability.Call // call, its payer decided once
	paid   capability.Paid
	perr   error
	ticket ticket
	body   bodyScan
}

// payer is the payer decided for the call, for the capability, which
// asks again.
func (mc *meteredCall) payer(context.Context, *http.Request) (capability.Paid, error) {
	return mc.paid, mc.perr
}

// prepare estimates the request, decides its payer and reserves its bound,
// or returns the refusal.
func (c *metered) prepare(w http.ResponseWriter, r *http.Request, call *capability.Call) (*meteredCall, error) {
	if call.Payer == nil {
		return &meteredCall{r: r, call: call}, nil
	}
	// The estimate may read the body; what is forwarded in its place
	// goes on a copy of r, so the server's own request keeps its own
	// body, read to its end, with nothing for the server to drain before
	// it answers.
	e, err := c.estimate(r, call.Box)
	if err != nil {
		return nil, err
	}
	if e.body != nil {
		r = r.WithContext(r.Context())
		r.Body = e.body
	}
	if !e.ok {
		return &meteredCall{r: r, call: call}, nil
	}
	// The payer is decided once: here, for the budget, and for the
	// capability, which asks again.
	mc := &meteredCall{r: r}
	mc.paid, mc.perr = call.Payer(r.Context(), r)
	mc.once = *call
	mc.once.Payer = mc.payer
	mc.call = &mc.once
	if mc.perr != nil {
		return mc, nil // refused as the capability refuses it
	}
	paid := mc.paid
	// A call refused for its payer's limits names its payer.
	refuse := func(err error) (*meteredCall, error) {
		w.Header().Set(protocol.HeaderPayer, protocol.FormatPayerHeader(paid.Payer))
		return nil, err
	}
	principal := ""
	if paid.Payer.Principal != nil {
		principal = *paid.Payer.Principal
	}
	now := c.m.cfg.Now().UTC()
	s := settlement{box: call.Box.Name, created: call.Box.CreatedAt, payer: paid.Payer.Kind, principal: principal, month: c.m.month(now), est: e.Estimate}
	if err := c.m.admitRate(w, &s); err != nil {
		return refuse(err)
	}
	if !e.later {
		s.bound = c.m.Bound(s.est)
	}
	if !e.later && s.bound > 0 && c.m.budgeted(r.Context(), s.box, s.created) {
		if e.Unboundable != "" {
			if err := c.m.refuseUnboundable(r.Context(), s, e.Unboundable); err != nil {
				return refuse(err)
			}
		}
		s.id, err = c.m.cfg.Store.Reserve(r.Context(), store.Reservation{Box: s.box, BoxCreated: s.created, Principal: principal, Month: s.month, Amount: s.bound, WindowAt: c.m.cfg.Now()})
		var obe *store.OverBudgetError
		if errors.As(err, &obe) {
			refusal := OverBudget(obe, s.bound)
			// With the box's owner asking about its budget, an approval
			// in force lets the call through once; otherwise the refusal
			// names the proposal it opened.
			// The attempt names its payer: an approval lets only a call
			// of that payer past the budget.
			approved, words := c.m.cfg.Approvals.Ask(r.Context(), approval.Attempt{Attempt: store.Attempt{Box: s.box, Kind: store.ProposalBudget, Model: keptModel(s.est.Model, "", nil), Amount: s.bound,
				Payer: protocol.FormatPayerHeader(paid.Payer), Reason: refusal.Message}, TokenHash: call.TokenHash, Forbidden: []string{call.Token}}, c.m.log, "spend: approvals unreadable; the call stays refused", "box", s.box)
			if !approved {
				refusal.Message += words
				return refuse(refusal)
			}
			// Approved: the call goes on with nothing reserved, and is
			// charged when it settles.
			s.id, err, s.approved = 0, nil, true
		}
		if err != nil {
			return nil, budgetUnreadable(err)
		}
		if s.id != 0 {
			c.m.liveMu.Lock()
			c.m.live[s.id] = struct{}{}
			c.m.liveMu.Unlock()
		}
	}
	mc.tk = &mc.ticket
	mc.r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, mc.tk))
	if e.later {
		mc.body.wrap(mc.r, c.cap, e.limit, &c.m.bufs)
		s.body = &mc.body
	}
	mc.s = s
	return mc, nil
}

// month is Month(t), for t in UTC, remembered from one call to the next.
func (m *Meter) month(t time.Time) string {
	y, mo, _ := t.Date()
	if c := m.lastMonth.Load(); c != nil && c.year == y && c.month == mo {
		return c.name
	}
	name := Month(t)
	m.lastMonth.Store(&monthName{y, mo, name})
	return name
}

// monthName is a month's name, as Month writes it.
type monthName struct {
	year  int
	month time.Month
	name  string
}

// budgeted reports whether the box named box, enrolled at created, may
// have a budget: false only when Config.Budgeted says for certain that it
// has none.
func (m *Meter) budgeted(ctx context.Context, box string, created time.Time) bool {
	if m.cfg.Budgeted == nil {
		return true
	}
	b, err := m.cfg.Budgeted(ctx, box, created)
	return b || err != nil
}
