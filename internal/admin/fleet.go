package admin

import (
	"cmp"
	"context"
	"net/http"
	"slices"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// SpendCounts is measured usage summed over some of a month's calls (the
// calls and tokens), and what the priced, measured calls cost.
type SpendCounts struct {
	operator.UsageCounts
	MeasuredUSD float64 `json:"measuredUsd"`
}

// PayerSpend is the fleet's measured spend paid by one payer kind
// (shared, owner, visitor, grant ...) and principal (null for none).
type PayerSpend struct {
	Payer     string  `json:"payer"`
	Principal *string `json:"principal"`
	SpendCounts
}

// PrincipalSpend is the fleet's spend paid by one principal (null for
// calls paid with none), measured beside charged: ChargedUSD is what was
// charged against budgets, the measured cost or, where a call's cost was
// not known (an unpriced model, a cut-off answer), its bound.
type PrincipalSpend struct {
	Principal *string `json:"principal"`
	SpendCounts
	ChargedUSD float64 `json:"chargedUsd"`
}

// ModelSpend is the fleet's measured spend on one model. Priced is false
// when any of its calls found no price (Unpriced > 0): what those calls
// cost is not in MeasuredUSD, and they were charged their bound.
type ModelSpend struct {
	Model  string `json:"model"`
	Priced bool   `json:"priced"`
	SpendCounts
}

// BoxSpend is one box's spend in the month, measured beside charged.
type BoxSpend struct {
	Box string `json:"box"`
	SpendCounts
	ChargedUSD float64 `json:"chargedUsd"`
}

// FleetSpend answers GET /api/spend: every box's spend in one month
// (UTC), in total and by payer and principal, by principal, by model and
// by box, each list the largest first. ChargedUSD is what was charged
// against the boxes' tallies; charged is kept by box and principal only,
// so the payer and model lists show measured spend alone.
type FleetSpend struct {
	Month string `json:"month"`
	SpendCounts
	ChargedUSD  float64          `json:"chargedUsd"`
	ByPayer     []PayerSpend     `json:"byPayer"`
	ByPrincipal []PrincipalSpend `json:"byPrincipal"`
	ByModel     []ModelSpend     `json:"byModel"`
	ByBox       []BoxSpend       `json:"byBox"`
	// Usage is the finest grain kept: one line per box, payer kind,
	// principal and model (GET /api/spend.csv's default rows).
	Usage []FleetUsage `json:"usage"`
	// Cache is the fleet's prompt-cache use, by box, payer kind and pool
	// entry.
	Cache operator.CacheView `json:"cache"`
}

// FleetUsage is one line of a box's measured usage in the month.
type FleetUsage struct {
	Box       string  `json:"box"`
	Payer     string  `json:"payer"`
	Principal *string `json:"principal"`
	Model     *string `json:"model"`
	SpendCounts
}

// countsOf is u's counts as the admin API shows them.
func countsOf(u store.Usage) SpendCounts {
	return SpendCounts{UsageCounts: operator.UsageCountsOf(u), MeasuredUSD: spend.Dollars(u.Cost)}
}

// usageAt is m's usage under k, added empty when there is none.
func usageAt[K comparable](m map[K]*store.Usage, k K) *store.Usage {
	if m[k] == nil {
		m[k] = &store.Usage{}
	}
	return m[k]
}

// FleetTotal is FleetSpend's totals for month alone, its lists empty:
// what the owner's page's fleet line shows, read as two sums in the
// store rather than row by row.
func (s *Server) FleetTotal(ctx context.Context, month string) (FleetSpend, error) {
	t, err := s.cfg.Store.FleetTotal(ctx, month)
	if err != nil {
		return FleetSpend{}, err
	}
	return FleetSpend{Month: month, SpendCounts: countsOf(t.Usage), ChargedUSD: spend.Dollars(t.Charged)}, nil
}

// FleetSpend returns every box's spend in month (YYYY-MM), read in four
// queries however many boxes there are.
func (s *Server) FleetSpend(ctx context.Context, month string) (FleetSpend, error) {
	us, err := s.cfg.Store.FleetUsage(ctx, month)
	if err != nil {
		return FleetSpend{}, err
	}
	ts, err := s.cfg.Store.FleetTallies(ctx, month)
	if err != nil {
		return FleetSpend{}, err
	}
	type payerKey struct{ payer, principal string }
	var total store.Usage
	byPayer := map[payerKey]*store.Usage{}
	byPrincipal := map[string]*store.Usage{}
	byModel := map[string]*store.Usage{}
	byBox := map[string]*store.Usage{}
	out := FleetSpend{Month: month, ByPayer: []PayerSpend{}, ByPrincipal: []PrincipalSpend{}, ByModel: []ModelSpend{},
		ByBox: []BoxSpend{}, Usage: make([]FleetUsage, 0, len(us))}
	for _, u := range us {
		total.Add(u)
		usageAt(byPayer, payerKey{u.PayerKind, u.Principal}).Add(u)
		usageAt(byPrincipal, u.Principal).Add(u)
		usageAt(byModel, u.Model).Add(u)
		usageAt(byBox, u.Box).Add(u)
		out.Usage = append(out.Usage, FleetUsage{Box: u.Box, Payer: u.PayerKind, Principal: operator.Optional(u.Principal),
			Model: operator.Optional(u.Model), SpendCounts: countsOf(u)})
	}
	// A box's own tally holds every call it was charged for; a
	// principal's, those that principal paid. What no principal paid is
	// the box's own less its principals'.
	boxCharged := map[string]int64{}
	principalCharged := map[string]int64{}
	var charged int64
	for _, t := range ts {
		if t.Principal == "" {
			boxCharged[t.Box] += t.Spent
			principalCharged[""] += t.Spent
			charged += t.Spent
			continue
		}
		principalCharged[t.Principal] += t.Spent
		principalCharged[""] -= t.Spent
	}
	principalCharged[""] = max(principalCharged[""], 0)
	for p, c := range principalCharged {
		if c != 0 {
			usageAt(byPrincipal, p)
		}
	}
	for b, c := range boxCharged {
		if c != 0 {
			usageAt(byBox, b)
		}
	}
	out.SpendCounts, out.ChargedUSD = countsOf(total), spend.Dollars(charged)
	for k, c := range byPayer {
		out.ByPayer = append(out.ByPayer, PayerSpend{Payer: k.payer, Principal: operator.Optional(k.principal), SpendCounts: countsOf(*c)})
	}
	for p, c := range byPrincipal {
		out.ByPrincipal = append(out.ByPrincipal, PrincipalSpend{Principal: operator.Optional(p), SpendCounts: countsOf(*c),
			ChargedUSD: spend.Dollars(principalCharged[p])})
	}
	for m, c := range byModel {
		out.ByModel = append(out.ByModel, ModelSpend{Model: m, Priced: c.Unpriced == 0, SpendCounts: countsOf(*c)})
	}
	for b, c := range byBox {
		out.ByBox = append(out.ByBox, BoxSpend{Box: b, SpendCounts: countsOf(*c), ChargedUSD: spend.Dollars(boxCharged[b])})
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	slices.SortFunc(out.ByPayer, func(a, b PayerSpend) int {
		return cmp.Or(cmp.Compare(b.MeasuredUSD, a.MeasuredUSD), cmp.Compare(a.Payer, b.Payer), cmp.Compare(deref(a.Principal), deref(b.Principal)))
	})
	slices.SortFunc(out.ByPrincipal, func(a, b PrincipalSpend) int {
		return cmp.Or(cmp.Compare(b.ChargedUSD, a.ChargedUSD), cmp.Compare(b.MeasuredUSD, a.MeasuredUSD), cmp.Compare(deref(a.Principal), deref(b.Principal)))
	})
	slices.SortFunc(out.ByModel, func(a, b ModelSpend) int {
		return cmp.Or(cmp.Compare(b.MeasuredUSD, a.MeasuredUSD), cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Model, b.Model))
	})
	slices.SortFunc(out.ByBox, func(a, b BoxSpend) int {
		return cmp.Or(cmp.Compare(b.ChargedUSD, a.ChargedUSD), cmp.Compare(b.MeasuredUSD, a.MeasuredUSD), cmp.Compare(a.Box, b.Box))
	})
	if out.Cache, err = s.op.Cache(ctx, "", month); err != nil {
		return FleetSpend{}, err
	}
	return out, nil
}

func (s *Server) fleetSpend(r *http.Request) (FleetSpend, error) {
	month, err := s.Month(r)
	if err != nil {
		return FleetSpend{}, err
	}
	out, err := s.FleetSpend(r.Context(), month)
	return out, operator.StoreError(err, "", "")
}

// SpendCSV answers GET /api/spend.csv, and the owner's page's download
// of the same: the fleet's spend in ?month= (this month when absent) as
// a CSV download, one row per line of the grain ?by= (SpendCSVGrains;
// usage when absent).
func (s *Server) SpendCSV(w http.ResponseWriter, r *http.Request) error {
	month, err := s.Month(r)
	if err != nil {
		return err
	}
	by, err := spendCSVGrain(r)
	if err != nil {
		return err
	}
	out, err := s.FleetSpend(r.Context(), month)
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	return writeSpendCSV(w, out, by)
}

// AuditCSV answers GET /api/audit.csv, and the owner's page's download
// of the same: the audit entries auditExport reads, as a CSV download.
func (s *Server) AuditCSV(w http.ResponseWriter, r *http.Request) error {
	entries, err := s.auditExport(r)
	if err != nil {
		return err
	}
	return writeAuditCSV(w, entries, s.cfg.Now())
}

// auditExport reads the audit entries GET /api/audit.csv exports: the
// query of GET /api/audit (box, since, refusals), limit up to
// MaxAuditExport (default DefaultAuditExport).
func (s *Server) auditExport(r *http.Request) ([]store.AuditEntry, error) {
	q, err := s.auditQuery(r, DefaultAuditExport, MaxAuditExport)
	if err != nil {
		return nil, err
	}
	entries, err := s.cfg.Store.ListAudit(r.Context(), q)
	if err != nil {
		return nil, operator.StoreError(err, "", "")
	}
	return entries, nil
}
