package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// The window budget bodies are the operator service's.
type (
	WindowBudgetView    = operator.WindowBudgetView
	WindowBudgetSetting = operator.WindowBudgetSetting
)

// RateLimitView is one rate limit: input and output tokens and requests
// a minute (0: no bound), of the box itself (principal null) or of the
// calls one principal pays for. It is also the body of PUT
// /api/boxes/{name}/rate-limits.
type RateLimitView struct {
	Principal *string `json:"principal"`
	InputTPM  int64   `json:"input_tpm"`
	OutputTPM int64   `json:"output_tpm"`
	RPM       int64   `json:"rpm"`
	UpdatedAt string  `json:"updatedAt,omitempty"`
}

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
func (s *Server) WindowBudgets(ctx context.Context, box string) ([]WindowBudgetView, error) {
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
	var set WindowBudgetSetting
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

// forPrincipal is " for P", or "" for the box's own.
func forPrincipal(p string) string {
	if p == "" {
		return ""
	}
	return " for " + p
}

func (s *Server) listRateLimits(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Store.Box(r.Context(), name); err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	ls, err := s.cfg.Store.ListRateLimits(r.Context(), name)
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	out := []RateLimitView{}
	for _, l := range ls {
		out = append(out, RateLimitView{Principal: optional(l.Principal), InputTPM: l.InputTPM, OutputTPM: l.OutputTPM, RPM: l.RPM, UpdatedAt: formatTime(l.UpdatedAt)})
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) setRateLimit(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	var set RateLimitView
	if err := readJSON(w, r, &set); err != nil {
		return err
	}
	principal, err := BudgetPrincipal(set.Principal)
	if err != nil {
		return err
	}
	if set.InputTPM < 0 || set.OutputTPM < 0 || set.RPM < 0 || set.InputTPM+set.OutputTPM+set.RPM == 0 {
		return operator.Errorf(operator.Invalid,
			"input_tpm, output_tpm and rpm are tokens or requests a minute, 0 or more (0: no bound), and at least one is above 0; DELETE removes a limit.")
	}
	l := store.RateLimit{Box: name, Principal: principal, InputTPM: set.InputTPM, OutputTPM: set.OutputTPM, RPM: set.RPM, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetRateLimit(r.Context(), l); err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	s.log.Info("admin: rate limit set", "box", name, "principal", principal, "input_tpm", l.InputTPM, "output_tpm", l.OutputTPM, "rpm", l.RPM)
	set.Principal, set.UpdatedAt = optional(principal), formatTime(l.UpdatedAt)
	return writeJSON(w, http.StatusOK, set)
}

func (s *Server) removeRateLimit(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	q := r.URL.Query().Get("principal")
	principal, err := BudgetPrincipal(&q)
	if err != nil {
		return err
	}
	err = s.cfg.Store.DeleteRateLimit(r.Context(), name, principal)
	if errors.Is(err, store.ErrNotFound) {
		return operator.StoreError(err, fmt.Sprintf("Box %s has no rate limit%s.", name, forPrincipal(principal)), "")
	}
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	s.log.Info("admin: rate limit removed", "box", name, "principal", principal)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
