package admin

import (
	"context"
	"net/http"
)

// Budgets, tallies and measured usage are read from the store, never a
// cache, at each call: a budget set or removed through the admin API is
// in force on every replica when it answers. Money is in US dollars, as
// JSON numbers exact to the micro-dollar (the broker keeps
// micro-dollars).

// Month reads a request's ?month= value: YYYY-MM, this month (UTC) when
// absent; a refusal when it is not a month (operator.Service.Month).
func (s *Server) Month(r *http.Request) (string, error) {
	return s.op.Month(r.URL.Query().Get("month"))
}

// boxMonth is the handler of a GET of one box's view of a month
// (?month=YYYY-MM, this month when absent): read's answer, which checks
// the box's name and the month.
func boxMonth[T any](read func(ctx context.Context, box, month string) (T, error)) func(http.ResponseWriter, *http.Request) error {
	return answer(http.StatusOK, func(r *http.Request) (T, error) {
		return read(r.Context(), r.PathValue("name"), r.URL.Query().Get("month"))
	})
}

// removeBudget answers DELETE /api/boxes/{name}/budgets?principal=P, the
// Box's own budget when principal is absent. The calls it held are still
// measured, and no longer limited.
func (s *Server) removeBudget(r *http.Request) error {
	return s.Op(r).RemoveBudget(r.Context(), r.PathValue("name"), r.URL.Query().Get("principal"))
}
