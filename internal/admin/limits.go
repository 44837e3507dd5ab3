package admin

import (
	"context"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// limitRoutes are the admin API's routes of window budgets and rate
// limits.
func (s *Server) limitRoutes() []Route {
	return []Route{
		{Pattern: "GET /api/boxes/{name}/window-budgets", Handle: s.listWindowBudgets},
		{Pattern: "PUT /api/boxes/{name}/window-budgets", Handle: s.setWindowBudget},
		{Pattern: "DELETE /api/boxes/{name}/window-budgets", Handle: s.removeWindowBudget},
		{Pattern: "GET /api/boxes/{name}/rate-limits", Handle: s.listRateLimits},
		{Pattern: "PUT /api/boxes/{name}/rate-limits", Handle: s.setRateLimit},
		{Pattern: "DELETE /api/boxes/{name}/rate-limits", Handle: s.removeRateLimit},
	}
}

// WindowBudgets returns box's window budgets and where they stand now.
func (s *Server) WindowBudgets(ctx context.Context, box string) ([]operator.WindowBudgetView, error) {
	return s.op.WindowBudgets(ctx, box)
}

func (s *Server) listWindowBudgets(w http.ResponseWriter, r *http.Request) error {
	out, err := s.WindowBudgets(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) setWindowBudget(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	var set operator.WindowBudgetSetting
	if err := readJSON(w, r, &set); err != nil {
		return err
	}
	out, err := s.Op(r, 0).SetWindowBudget(r.Context(), name, set)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) removeWindowBudget(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if err := s.Op(r, 0).RemoveWindowBudget(r.Context(), name, q.Get("principal"), q.Get("window")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listRateLimits(w http.ResponseWriter, r *http.Request) error {
	out, err := s.op.RateLimits(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) setRateLimit(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	var set operator.RateLimitView
	if err := readJSON(w, r, &set); err != nil {
		return err
	}
	out, err := s.Op(r, 0).SetRateLimit(r.Context(), name, set)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) removeRateLimit(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	if err := s.Op(r, 0).RemoveRateLimit(r.Context(), name, r.URL.Query().Get("principal")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
