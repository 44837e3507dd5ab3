package spend

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// settlement is what a metered request settles.
type settlement struct {
	box, payer, principal, month string
	// created is the box's CreatedAt as the call was admitted: the box
	// reserved for and charged, and no other of its name.
	created time.Time
	id      int64
	// approved is set for a call an approval let past a budget: it
	// reserved nothing (id 0) but is charged against that budget, so it
	// is recorded as a reserved call is, and its box's alerts looked at.
	approved bool
	est      Estimate
	bound    int64
	// body, when not nil, makes est and bound as the call settles: it
	// reserved nothing, and its body was read only as it was forwarded.
	body *bodyScan
}

// estimateLate makes s's estimate and bound from its body, when the body
// is to make them (s.body is set), and they are needed.
func (m *Meter) estimateLate(s *settlement) {
	if s.body != nil {
		s.est = s.body.estimate(m.cfg.MaxTokens, m.cfg.MaxBody)
		s.bound = m.Bound(s.est)
		s.body = nil
	}
}

// keptModel is model as a usage row, a log line and the unpriced list
// may keep it: "" when it holds a token (a box's, a grant) or a
// credential the call was made on (sent, the one its header carried, and
// earlier, those of the pool entries it failed over from, which the
// upstream saw too), which a box or an upstream could name as the model
// for the broker to write where others read it. Otherwise it is
// text every store takes (store.Text): a box's model (or the one an
// upstream names) holding a NUL made a settlement PostgreSQL refuses for
// good, set aside with its charge and its reservation's release.
func keptModel(model, sent string, earlier []string) string {
	if _, n := proxy.ScrubTokens(model); n > 0 || sent != "" && strings.Contains(model, sent) {
		return ""
	}
	for _, v := range earlier {
		if v != "" && strings.Contains(model, v) {
			return ""
		}
	}
	return store.Text(model, 0)
}

// maxModel bounds the model ID kept, as the upstream names it.
const maxModel = 200

// settle releases s's reservation and charges what tk read: the cost of
// the tokens each answer reported, at its model's price in the geography
// the answer says its inference ran in, or the request asked for when it
// says "global" or nothing (Price.GeoUS) — or, for a model
// the table does not name, at the price Prices.Resolve gives it (its
// family's newest model, or UnpricedAs), which the reservation bounded
// too — when every answer was read whole, or else the larger of that and
// the request's bound, since an answer cut off may have cost up to it.
// The usage rows' cost (what was measured) counts only models the table
// prices by their family or name; a row's Unpriced counts the calls
// charged as UnpricedAs.
//
// ctx is the request's: its values are read as they are (through
// context.WithoutCancel each read would allocate), and only the store's
// write is made under a context the request's end does not cancel.
func (m *Meter) settle(ctx context.Context, s settlement, tk *ticket) {
	if s.body != nil {
		defer s.body.release()
	}
	if s.id != 0 {
		defer func() {
			m.liveMu.Lock()
			delete(m.live, s.id)
			m.liveMu.Unlock()
		}()
	}
	tk.mu.Lock()
	// Most calls read one answer: their readings stay on the stack.
	var few [2]reading
	readings := few[:0]
	for _, r := range tk.readings {
		readings = append(readings, *r)
	}
	tk.mu.Unlock()
	var rows []store.Usage
	var answeredModels []string // the models of rows an answer named
	var cache []store.CacheUsage
	hour := m.cfg.Now().UTC().Truncate(time.Hour)
	var cost, charged int64
	exact := true
	for _, rd := range readings {
		model := keptModel(rd.model, rd.sent, rd.earlier)
		answered := model != "" // the upstream's answer named it
		if model == "" {
			m.estimateLate(&s)
			model = keptModel(s.est.Model, rd.sent, rd.earlier)
		}
		// Cut at a character's boundary: a cut inside one is invalid
		// UTF-8, which PostgreSQL refuses.
		model = store.Text(model, maxModel)
		cache = store.Merge(cache, store.CacheUsage{Box: s.box, PayerKind: s.payer, Entry: rd.entry, Hour: hour, Calls: 1,
			InputTokens: rd.tokens.Input, CacheWriteTokens: rd.tokens.CacheWrite, CacheReadTokens: rd.tokens.CacheRead},
			func(c *store.CacheUsage) bool { return c.Entry == rd.entry }) // payer kind and hour are the settlement's
		u := store.Usage{Box: s.box, Month: s.month, PayerKind: s.payer, Principal: s.principal, Model: model, Calls: 1,
			InputTokens: rd.tokens.Input, OutputTokens: rd.tokens.Output, CacheWriteTokens: rd.tokens.CacheWrite, CacheReadTokens: rd.tokens.CacheRead}
		res := m.resolve(model, answered)
		priced := res.Match != Unpriced
		if !priced {
			u.Unpriced = 1
		}
		if rd.measured && !rd.open {
			t := rd.tokens
			if s.est.Geo != "" && (t.Geo == "" || t.Geo == "global") {
				// priced as the request asked, as it was bounded
				t.Geo = s.est.Geo
			}
			c := res.Cost(t)
			charged = store.AddCapped(charged, c)
			if priced {
				u.Cost = c
				cost = store.AddCapped(cost, c)
			}
		} else {
			u.Unmeasured = 1
			exact = false
		}
		rows = store.Merge(rows, u, func(r *store.Usage) bool { return r.Model == model })
		if answered && !slices.Contains(answeredModels, model) {
			answeredModels = append(answeredModels, model)
		}
	}
	// The request's log line and audit row show the measured cost,
	// priced here once.
	proxy.TraceFrom(ctx).AddCost(cost)
	m.count(ctx, s.payer, rows, answeredModels)
	charge := charged
	if !exact {
		m.estimateLate(&s)
		charge = max(charged, s.bound)
	}
	m.chargeRate(&s, readings)
	if s.id == 0 && len(rows) == 0 {
		return // nothing held, nothing spent
	}
	st := store.Settlement{Reservation: s.id, Box: s.box, BoxCreated: s.created, Principal: s.principal, Month: s.month, Charge: charge, Usage: rows, Cache: cache, At: m.cfg.Now()}
	if s.id == 0 && !s.approved && m.cfg.Outbox != nil && m.cfg.Outbox.QueueCall(ctx, st) {
		return // settled with others, by the outbox
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := m.record(ctx, st)
	if err != nil {
		m.log.Error("spend: settlement not recorded", "box", s.box, "month", s.month, "charge_micros", charge, "err", err)
		return
	}
	if (s.id != 0 || s.approved) && m.cfg.Alerter != nil {
		m.cfg.Alerter.Touch(s.box)
	}
	if !m.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	m.estimateLate(&s)
	m.log.Debug("spend: settled", "box", s.box, "payer", s.payer, "principal", s.principal, "month", s.month,
		"calls", len(readings), "charge_micros", charge, "bound_micros", s.bound, "exact", exact)
}

// record writes st to the outbox, or to the store when there is none.
func (m *Meter) record(ctx context.Context, st store.Settlement) error {
	if m.cfg.Outbox != nil {
		return m.cfg.Outbox.Settle(ctx, st)
	}
	return m.cfg.Settle.Settle(ctx, st)
}
