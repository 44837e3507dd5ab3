package admin

import (
	"context"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
)

// Budgets, tallies and measured usage are read from the store, never a
// cache, at each call: a budget set or removed through the admin API is
// in force on every replica when it answers. Money is in US dollars, as
// JSON numbers exact to the micro-dollar (the broker keeps
// micro-dollars).

// The budget bodies are the operator service's.
type (
	BudgetView    = operator.BudgetView
	BudgetList    = operator.BudgetList
	BudgetSetting = operator.BudgetSetting
)

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
	return s.op.Budgets(ctx, box, month)
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
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// BudgetPrincipal checks a budget's principal: nil or "" for the box's own.
func BudgetPrincipal(p *string) (string, error) { return operator.BudgetPrincipal(p) }

// NoBudget says box has no such budget.
func NoBudget(box, principal string) string { return operator.NoBudget(box, principal) }

func (s *Server) setBudget(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	var bs BudgetSetting
	if err := readJSON(w, r, &bs); err != nil {
		return err
	}
	out, err := s.Op(r, 0).SetBudget(r.Context(), name, bs)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// removeBudget answers DELETE /api/boxes/{name}/budgets?principal=P, the
// Box's own budget when principal is absent. The calls it held are still
// measured, and no longer limited.
func (s *Server) removeBudget(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	if err := s.Op(r, 0).RemoveBudget(r.Context(), name, r.URL.Query().Get("principal")); err != nil {
		return err
	}
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
