package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// WindowBudgetView is one budget over a window other than the calendar
// month (day, week, or Nd for a rolling N days) and where it stands now:
// USD its limit, Spent and Held what the window counts, Left what
// remains, From and To the first and last day (YYYY-MM-DD) it counts, and
// Bucket the name of the bucket a call is charged to now (its first day:
// a week's Monday).
type WindowBudgetView struct {
	Principal *string `json:"principal"`
	Window    string  `json:"window"`
	USD       float64 `json:"usd"`
	Spent     float64 `json:"spent"`
	Held      float64 `json:"held"`
	Left      float64 `json:"left"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Bucket    string  `json:"bucket"`
}

// WindowBudgetSetting is the body of PUT /api/boxes/{name}/window-budgets.
type WindowBudgetSetting struct {
	Window    string      `json:"window"`
	USD       json.Number `json:"usd"`
	Principal *string     `json:"principal"`
}

// forPrincipal is " for P", or "" for the box's own.
func forPrincipal(p string) string {
	if p == "" {
		return ""
	}
	return " for " + p
}

// whoseOf names the box itself ("") or a principal.
func whoseOf(principal string) string {
	if principal == "" {
		return "the box"
	}
	return principal
}

// WindowBudgets returns box's window budgets and where they stand now.
// NotFound for no such box.
func (s *Service) WindowBudgets(ctx context.Context, box string) ([]WindowBudgetView, error) {
	if _, err := s.StoredBox(ctx, box); err != nil {
		return nil, err
	}
	return s.windowBudgets(ctx, box)
}

func (s *Service) windowBudgets(ctx context.Context, box string) ([]WindowBudgetView, error) {
	now := s.cfg.Now()
	ts, err := s.cfg.Store.WindowTallies(ctx, box, now)
	if err != nil {
		return nil, StoreError(err, "", "")
	}
	out := []WindowBudgetView{}
	for _, t := range ts {
		to := t.Bucket
		if w, err := store.ParseWindow(t.Budget.Window); err == nil {
			to = w.To(now)
		}
		out = append(out, WindowBudgetView{Principal: Optional(t.Budget.Principal), Window: t.Budget.Window, USD: spend.Dollars(t.Budget.Limit),
			Spent: spend.Dollars(t.Spent), Held: spend.Dollars(t.Reserved), Left: spend.Dollars(max(t.Budget.Limit-t.Spent-t.Reserved, 0)), From: t.From, To: to, Bucket: t.Bucket})
	}
	return out, nil
}

// SetWindowBudget sets box's own budget over set's window, or set's
// principal's, and returns the box's window budgets once its next call
// is held to it. Invalid for a bad principal, window or amount, NotFound
// for no such box.
func (s *Service) SetWindowBudget(ctx context.Context, box string, set WindowBudgetSetting) ([]WindowBudgetView, error) {
	principal, err := limitOf(box, set.Principal)
	if err != nil {
		return nil, err
	}
	win, err := store.ParseWindow(set.Window)
	if err != nil {
		return nil, Errorf(Invalid,
			"window is day, week, or Nd for a rolling N days from 1 to %d, such as 7d; a monthly budget is set at /api/boxes/%s/budgets.", store.MaxRollingDays, box)
	}
	limit, err := parseUSD(set.USD)
	if err != nil {
		return nil, err
	}
	b := store.Budget{Box: box, Principal: principal, Window: set.Window, Limit: limit, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetWindowBudget(ctx, b); err != nil {
		return nil, StoreError(err, NoBox(box), "")
	}
	if err := s.wrote(ctx, store.ChangeBudget, box, box, http.StatusOK, setBudgetMessage(win.Describe(), principal, limit)); err != nil {
		return nil, err
	}
	return s.windowBudgets(ctx, box)
}

// RemoveWindowBudget removes box's own budget over window (principal
// "") or principal's; the calls it held are still measured. NotFound for
// no such budget.
func (s *Service) RemoveWindowBudget(ctx context.Context, box, principal, window string) error {
	if _, err := limitOf(box, &principal); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteWindowBudget(ctx, box, principal, window); err != nil {
		return StoreError(err, fmt.Sprintf("Box %s has no %s budget%s.", box, window, forPrincipal(principal)), "")
	}
	return s.wrote(ctx, store.ChangeBudget, box, box, http.StatusNoContent, fmt.Sprintf("removed the %s budget of %s", window, whoseOf(principal)))
}
