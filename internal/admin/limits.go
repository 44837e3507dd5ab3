package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// WindowBudgetView is one budget over a window other than the calendar
// month (day, week, or Nd for a rolling N days) and where it stands now:
// USD its limit, Spent and Held what the window counts, Left what
// remains, From and Bucket the first and last day (YYYY-MM-DD) it counts.
type WindowBudgetView struct {
	Principal *string `json:"principal"`
	Window    string  `json:"window"`
	USD       float64 `json:"usd"`
	Spent     float64 `json:"spent"`
	Held      float64 `json:"held"`
	Left      float64 `json:"left"`
	From      string  `json:"from"`
	Bucket    string  `json:"bucket"`
}

// WindowBudgetSetting is the body of PUT /api/boxes/{name}/window-budgets.
type WindowBudgetSetting struct {
	Window    string      `json:"window"`
	USD       json.Number `json:"usd"`
	Principal *string     `json:"principal"`
}

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
	ts, err := s.cfg.Store.WindowTallies(ctx, box, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	out := []WindowBudgetView{}
	for _, t := range ts {
		out = append(out, WindowBudgetView{Principal: optional(t.Budget.Principal), Window: t.Budget.Window, USD: dollars(t.Budget.Limit),
			Spent: dollars(t.Spent), Held: dollars(t.Reserved), Left: dollars(max(t.Budget.Limit-t.Spent-t.Reserved, 0)), From: t.From, Bucket: t.Bucket})
	}
	return out, nil
}

func (s *Server) listWindowBudgets(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Store.Box(r.Context(), name); err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	out, err := s.WindowBudgets(r.Context(), name)
	if err != nil {
		return operator.StoreError(err, "", "")
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
	principal, err := BudgetPrincipal(set.Principal)
	if err != nil {
		return err
	}
	if _, err := store.ParseWindow(set.Window); err != nil {
		return operator.Errorf(operator.Invalid,
			"window is day, week, or Nd for a rolling N days from 1 to %d, such as 7d; a monthly budget is set at /api/boxes/%s/budgets.", store.MaxRollingDays, name)
	}
	limit, err := spend.ParseUSD(set.USD.String())
	if err != nil {
		return operator.Errorf(operator.Invalid,
			"usd is a budget in dollars from 0 to %d with at most six decimals, such as 25 or 25.50.", spend.MaxUSD)
	}
	b := store.Budget{Box: name, Principal: principal, Window: set.Window, Limit: limit, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetWindowBudget(r.Context(), b); err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	if err := s.Changed(r.Context(), store.ChangeBudget, name); err != nil {
		return err
	}
	s.log.Info("admin: window budget set", "box", name, "principal", principal, "window", set.Window, "limit", spend.FormatUSD(limit))
	out, err := s.WindowBudgets(r.Context(), name)
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) removeWindowBudget(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	q := r.URL.Query().Get("principal")
	principal, err := BudgetPrincipal(&q)
	if err != nil {
		return err
	}
	window := r.URL.Query().Get("window")
	err = s.cfg.Store.DeleteWindowBudget(r.Context(), name, principal, window)
	if err != nil {
		return operator.StoreError(err, fmt.Sprintf("Box %s has no %s budget%s.", name, window, forPrincipal(principal)), "")
	}
	if err := s.Changed(r.Context(), store.ChangeBudget, name); err != nil {
		return err
	}
	s.log.Info("admin: window budget removed", "box", name, "principal", principal, "window", window)
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
