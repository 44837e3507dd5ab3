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
func (s *Server) Budgets(ctx context.Context, box, month string) (operator.BudgetList, error) {
	return s.op.Budgets(ctx, box, month)
}

// SpendReport returns box's spend in month (YYYY-MM), measured beside
// reported (operator.Service.Spend).
func (s *Server) SpendReport(ctx context.Context, box, month string) (operator.SpendReport, error) {
	return s.op.Spend(ctx, box, month)
}

// boxMonth is the handler of a GET of one box's view of a month
// (?month=YYYY-MM, this month when absent): read's answer.
func boxMonth[T any](s *Server, read func(ctx context.Context, box, month string) (T, error)) func(http.ResponseWriter, *http.Request) error {
	return answer(http.StatusOK, func(r *http.Request) (T, error) {
		var zero T
		name, err := BoxName(r)
		if err != nil {
			return zero, err
		}
		month, err := s.month(r)
		if err != nil {
			return zero, err
		}
		return read(r.Context(), name, month)
	})
}

func (s *Server) setBudget(r *http.Request, bs operator.BudgetSetting) (operator.BudgetView, error) {
	return s.Op(r, 0).SetBudget(r.Context(), r.PathValue("name"), bs)
}

// removeBudget answers DELETE /api/boxes/{name}/budgets?principal=P, the
// Box's own budget when principal is absent. The calls it held are still
// measured, and no longer limited.
func (s *Server) removeBudget(r *http.Request) error {
	return s.Op(r, 0).RemoveBudget(r.Context(), r.PathValue("name"), r.URL.Query().Get("principal"))
}
