package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// Budgets, tallies and measured usage are read from the store, never a
// cache, at each call: a budget set or removed through the admin API is
// in force on every replica when it answers. Money is in US dollars, as
// JSON numbers exact to the micro-dollar (the broker keeps
// micro-dollars).

// BudgetView is one monthly budget and where it stands in the month
// asked for: USD is its limit, Spent what has been charged against it,
// Held what is reserved for calls in flight, Left what remains (never
// below zero). Principal is null for the box's own budget, which holds
// every call the box makes.
type BudgetView struct {
	Principal *string `json:"principal"`
	USD       float64 `json:"usd"`
	Spent     float64 `json:"spent"`
	Held      float64 `json:"held"`
	Left      float64 `json:"left"`
	UpdatedAt string  `json:"updatedAt"`
}

// BudgetList answers GET /api/boxes/{name}/budgets: the month (UTC), when
// its tallies reset, and the box's budgets, its own first.
type BudgetList struct {
	Month   string       `json:"month"`
	Resets  string       `json:"resets"`
	Budgets []BudgetView `json:"budgets"`
}

// BudgetSetting is the body of PUT /api/boxes/{name}/budgets: a monthly
// limit in dollars (at most six decimals), for the box itself (principal
// null or absent) or for the calls one principal pays for.
type BudgetSetting struct {
	USD       json.Number `json:"usd"`
	Principal *string     `json:"principal"`
}

// ReportedSpend is what a box reported spending: dollars, runs and runs
// it could not price.
type ReportedSpend struct {
	USD      float64 `json:"usd"`
	Runs     int64   `json:"runs"`
	Unpriced int64   `json:"unpriced"`
}

// SpendLine is one principal's spend in a month, measured beside
// reported. Principal is null for calls paid with no principal (the
// shared credential) and runs the box reported under none.
type SpendLine struct {
	Principal *string `json:"principal"`
	// MeasuredUSD is what the broker measured of priced calls whose usage
	// it read whole; Calls counts the calls, Unpriced those of a model
	// with no price, Unmeasured those whose usage was not read whole.
	MeasuredUSD float64 `json:"measuredUsd"`
	Calls       int64   `json:"calls"`
	Unpriced    int64   `json:"unpriced"`
	Unmeasured  int64   `json:"unmeasured"`
	// ChargedUSD is what was charged against budgets: the measured cost,
	// or a call's bound where its cost was not known.
	ChargedUSD float64 `json:"chargedUsd"`
	// Reported is the box's own figure; null when its report named no
	// such principal for the month.
	Reported *ReportedSpend `json:"reported"`
	// Differs is true when measured and reported differ by more than a
	// cent or 5% (a missing side counting as zero); only ever true when
	// the box reported spend for the month.
	Differs bool `json:"differs"`
}

// UsageView is measured usage by payer kind, principal and model.
type UsageView struct {
	Payer            string  `json:"payer"`
	Principal        *string `json:"principal"`
	Model            *string `json:"model"`
	Calls            int64   `json:"calls"`
	Unpriced         int64   `json:"unpriced"`
	Unmeasured       int64   `json:"unmeasured"`
	InputTokens      int64   `json:"inputTokens"`
	OutputTokens     int64   `json:"outputTokens"`
	CacheWriteTokens int64   `json:"cacheWriteTokens"`
	CacheReadTokens  int64   `json:"cacheReadTokens"`
	CostUSD          float64 `json:"costUsd"`
}

// SpendReport answers GET /api/boxes/{name}/spend: a box's spend in one
// month as the broker measured it beside what the box reported, by
// principal, differences flagged.
type SpendReport struct {
	Box         string  `json:"box"`
	Month       string  `json:"month"`
	MeasuredUSD float64 `json:"measuredUsd"`
	Calls       int64   `json:"calls"`
	Unpriced    int64   `json:"unpriced"`
	Unmeasured  int64   `json:"unmeasured"`
	ChargedUSD  float64 `json:"chargedUsd"`
	// Reported is the spend the box's last report carried for Month; null
	// when it carried none for that month. ReportedMonth is the month the
	// carried spend is for (null when none was carried), and ReportedAt
	// when the last report came (null when never).
	Reported      *ReportedSpend `json:"reported"`
	ReportedMonth *string        `json:"reportedMonth"`
	ReportedAt    *string        `json:"reportedAt"`
	// Differs is true when the totals, or any line, differ.
	Differs     bool        `json:"differs"`
	ByPrincipal []SpendLine `json:"byPrincipal"`
	Usage       []UsageView `json:"usage"`
	// Cache is the box's prompt-cache use, by payer kind and pool entry.
	Cache CacheView `json:"cache"`
}

// dollars is micro-dollars as dollars.
func dollars(micros int64) float64 { return float64(micros) / 1e6 }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// month reads the ?month= query value: YYYY-MM, this month (UTC) when
// absent.
func (s *Server) month(r *http.Request) (string, error) {
	m := r.URL.Query().Get("month")
	if m == "" {
		return spend.Month(s.cfg.Now()), nil
	}
	if spend.Resets(m).IsZero() {
		return "", operator.Errorf(operator.Invalid, "month is written YYYY-MM, such as 2026-10.")
	}
	return m, nil
}

// Budgets returns box's budgets and where they stand in month (YYYY-MM).
func (s *Server) Budgets(ctx context.Context, box, month string) (BudgetList, error) {
	bs, err := spend.Budgets(ctx, s.cfg.Store, box, month)
	if err != nil {
		return BudgetList{}, err
	}
	out := BudgetList{Month: month, Resets: formatTime(spend.Resets(month)), Budgets: []BudgetView{}}
	for _, b := range bs {
		out.Budgets = append(out.Budgets, budgetView(b))
	}
	return out, nil
}

func budgetView(b spend.BudgetStatus) BudgetView {
	return BudgetView{Principal: optional(b.Principal), USD: dollars(b.Limit), Spent: dollars(b.Spent),
		Held: dollars(b.Reserved), Left: dollars(b.Left), UpdatedAt: formatTime(b.UpdatedAt)}
}

// SpendReport returns box's spend in month (YYYY-MM), measured beside
// reported (spend.Compare).
func (s *Server) SpendReport(ctx context.Context, box, month string) (SpendReport, error) {
	rep, err := spend.Compare(ctx, s.cfg.Store, box, month)
	if err != nil {
		return SpendReport{}, err
	}
	out := SpendReport{Box: rep.Box, Month: rep.Month, MeasuredUSD: dollars(rep.Measured), Calls: rep.Calls,
		Unpriced: rep.Unpriced, Unmeasured: rep.Unmeasured, ChargedUSD: dollars(rep.Charged), Differs: rep.Differs,
		ReportedMonth: optional(rep.ReportedMonth), ByPrincipal: []SpendLine{}, Usage: []UsageView{}}
	if !rep.ReportedAt.IsZero() {
		at := formatTime(rep.ReportedAt)
		out.ReportedAt = &at
	}
	if rep.Reported != nil {
		out.Reported = &ReportedSpend{USD: rep.Reported.USD, Runs: rep.Reported.Runs, Unpriced: rep.Reported.Unpriced}
	}
	for _, l := range rep.Lines {
		line := SpendLine{Principal: l.Principal, MeasuredUSD: dollars(l.Measured), Calls: l.Calls, Unpriced: l.Unpriced,
			Unmeasured: l.Unmeasured, ChargedUSD: dollars(l.Charged), Differs: l.Differs}
		if l.Reported != nil {
			line.Reported = &ReportedSpend{USD: l.Reported.USD, Runs: l.Reported.Runs, Unpriced: l.Reported.Unpriced}
		}
		out.ByPrincipal = append(out.ByPrincipal, line)
	}
	for _, u := range rep.Usage {
		out.Usage = append(out.Usage, UsageView{Payer: u.PayerKind, Principal: optional(u.Principal), Model: optional(u.Model),
			Calls: u.Calls, Unpriced: u.Unpriced, Unmeasured: u.Unmeasured, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheWriteTokens: u.CacheWriteTokens, CacheReadTokens: u.CacheReadTokens, CostUSD: dollars(u.Cost)})
	}
	if out.Cache, err = s.Cache(ctx, box, month); err != nil {
		return SpendReport{}, err
	}
	return out, nil
}

func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	month, err := s.month(r)
	if err != nil {
		return err
	}
	out, err := s.Budgets(r.Context(), name, month)
	if err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	return writeJSON(w, http.StatusOK, out)
}

// BudgetPrincipal checks a budget's principal: nil or "" for the box's own.
func BudgetPrincipal(p *string) (string, error) {
	if p == nil || *p == "" {
		return "", nil
	}
	if !protocol.IsPrincipal(*p) {
		return "", operator.Errorf(operator.Invalid,
			"A budget's principal is null (the box's own budget) or 1 to 200 characters with no white space, such as github:<login>.")
	}
	return *p, nil
}

// NoBudget says box has no such budget.
func NoBudget(box, principal string) string {
	if principal == "" {
		return "Box " + box + " has no budget of its own."
	}
	return "Box " + box + " has no budget for " + principal + "."
}

func (s *Server) setBudget(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	var bs BudgetSetting
	if err := readJSON(w, r, &bs); err != nil {
		return err
	}
	principal, err := BudgetPrincipal(bs.Principal)
	if err != nil {
		return err
	}
	limit, err := spend.ParseUSD(bs.USD.String())
	if err != nil {
		return operator.Errorf(operator.Invalid,
			"usd is a budget in dollars from 0 to %d with at most six decimals, such as 25 or 25.50.", spend.MaxUSD)
	}
	b := store.Budget{Box: name, Principal: principal, Limit: limit, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetBudget(r.Context(), b); err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	if err := s.Changed(r.Context(), store.ChangeBudget, name); err != nil {
		return err
	}
	s.log.Info("admin: budget set", "box", name, "principal", principal, "limit", spend.FormatUSD(limit))
	list, err := spend.Budgets(r.Context(), s.cfg.Store, name, spend.Month(s.cfg.Now()))
	if err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	for _, bst := range list {
		if bst.Principal == principal {
			return writeJSON(w, http.StatusOK, budgetView(bst))
		}
	}
	// Removed again between the two reads.
	return operator.StoreError(store.ErrNotFound, NoBudget(name, principal)+" (It was removed meanwhile.)", "")
}

// removeBudget answers DELETE /api/boxes/{name}/budgets?principal=P, the
// Box's own budget when principal is absent. The calls it held are still
// measured, and no longer limited.
func (s *Server) removeBudget(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	q := r.URL.Query().Get("principal")
	principal, err := BudgetPrincipal(&q)
	if err != nil {
		return err
	}
	err = s.cfg.Store.DeleteBudget(r.Context(), name, principal)
	if errors.Is(err, store.ErrNotFound) {
		if _, berr := s.cfg.Store.Box(r.Context(), name); errors.Is(berr, store.ErrNotFound) {
			return operator.StoreError(berr, operator.NoBox(name), "")
		}
	}
	if err != nil {
		return operator.StoreError(err, NoBudget(name, principal), "")
	}
	if err := s.Changed(r.Context(), store.ChangeBudget, name); err != nil {
		return err
	}
	s.log.Info("admin: budget removed", "box", name, "principal", principal)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) spendReport(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	month, err := s.month(r)
	if err != nil {
		return err
	}
	out, err := s.SpendReport(r.Context(), name, month)
	if err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	return writeJSON(w, http.StatusOK, out)
}
