package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// limitRoutes are the admin API's routes of window budgets and rate
// limits.
func (s *Server) limitRoutes() []Route {
	return []Route{
		{Pattern: "GET /api/boxes/{name}/window-budgets", Handle: answer(http.StatusOK, byPath(s, "name", (*operator.Service).WindowBudgets))},
		{Pattern: "PUT /api/boxes/{name}/window-budgets", Handle: decode(http.StatusOK, boxNamed, byPathBody(s, "name", (*operator.Service).SetWindowBudget))},
		{Pattern: "DELETE /api/boxes/{name}/window-budgets", Handle: noContent(s.removeWindowBudget)},
		{Pattern: "GET /api/boxes/{name}/rate-limits", Handle: answer(http.StatusOK, byPath(s, "name", (*operator.Service).RateLimits))},
		{Pattern: "PUT /api/boxes/{name}/rate-limits", Handle: decode(http.StatusOK, boxNamed, byPathBody(s, "name", (*operator.Service).SetRateLimit))},
		{Pattern: "DELETE /api/boxes/{name}/rate-limits", Handle: noContent(s.removeRateLimit)},
	}
}

func (s *Server) removeWindowBudget(r *http.Request) error {
	q := r.URL.Query()
	return s.Op(r).RemoveWindowBudget(r.Context(), r.PathValue("name"), q.Get("principal"), q.Get("window"))
}

func (s *Server) removeRateLimit(r *http.Request) error {
	return s.Op(r).RemoveRateLimit(r.Context(), r.PathValue("name"), r.URL.Query().Get("principal"))
}
