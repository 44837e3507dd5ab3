package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// limitsCard is what a box's page shows of its window budgets, rate
// limits and budget alerts.
type limitsCard struct {
	Windows []operator.WindowBudgetView
	Rates   []store.RateLimit
	// Alerts are the box's latest budget alerts, newest first.
	Alerts []store.BudgetAlert
}

// limitsOf reads box's limitsCard.
func (u *Page) limitsOf(ctx context.Context, box string) (limitsCard, error) {
	var c limitsCard
	var err error
	if c.Windows, err = u.a.WindowBudgets(ctx, box); err != nil {
		return c, err
	}
	if c.Rates, err = u.cfg.Store.ListRateLimits(ctx, box); err != nil {
		return c, err
	}
	c.Alerts, err = u.cfg.Store.ListAlerts(ctx, box, 10)
	return c, err
}

// registerLimits adds the routes of window budgets and rate limits.
func (u *Page) registerLimits() {
	u.HandleUI("POST /ui/boxes/{name}/window-budget", u.setWindowBudget)
	u.HandleUI("POST /ui/boxes/{name}/window-budget/remove", u.removeWindowBudget)
	u.HandleUI("POST /ui/boxes/{name}/rate-limit", u.setRateLimit)
	u.HandleUI("POST /ui/boxes/{name}/rate-limit/remove", u.removeRateLimit)
}

// formPrincipal reads the form's principal ("" for the box's own).
func formPrincipal(r *http.Request) (string, error) {
	p := strings.TrimSpace(r.PostForm.Get("principal"))
	return operator.BudgetPrincipal(&p)
}

// boxAndPrincipal reads the box the route names and the form's
// principal, the start of every budget-window and rate-limit form.
func (u *Page) boxAndPrincipal(r *http.Request) (store.Box, string, error) {
	b, err := u.a.Box(r)
	if err != nil {
		return store.Box{}, "", err
	}
	principal, err := formPrincipal(r)
	return b, principal, err
}

func (u *Page) setWindowBudget(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, principal, err := u.boxAndPrincipal(r)
	if err != nil {
		return err
	}
	window := strings.TrimSpace(r.PostForm.Get("window"))
	if _, err := store.ParseWindow(window); err != nil {
		return operator.Errorf(operator.Invalid, "The window is day, week, or Nd for a rolling N days (1 to %d), such as 7d.", store.MaxRollingDays)
	}
	usd, err := formUSD(r)
	if err != nil {
		return err
	}
	set := operator.WindowBudgetSetting{Window: window, USD: json.Number(usd), Principal: &principal}
	if _, err := u.op(r).SetWindowBudget(r.Context(), b.Name, set); err != nil {
		return err
	}
	back(w, r, b.Name, "budget")
	return nil
}

func (u *Page) removeWindowBudget(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, principal, err := u.boxAndPrincipal(r)
	if err != nil {
		return err
	}
	window := r.PostForm.Get("window")
	if err := u.op(r).RemoveWindowBudget(r.Context(), b.Name, principal, window); err != nil {
		return err
	}
	back(w, r, b.Name, "budget-removed")
	return nil
}

// formUSD reads a form's usd field, a budget in dollars ("$" allowed).
func formUSD(r *http.Request) (string, error) {
	usd := strings.TrimPrefix(strings.TrimSpace(r.PostForm.Get("usd")), "$")
	if _, err := spend.ParseUSD(usd); err != nil {
		return "", operator.Errorf(operator.Invalid,
			"A budget is in dollars from 0 to %d with at most six decimals, such as 25 or 25.50.", spend.MaxUSD)
	}
	return usd, nil
}

// formCount reads a form's count field: empty is 0.
func formCount(r *http.Request, name string) (int64, error) {
	v := strings.TrimSpace(r.PostForm.Get(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New(name)
	}
	return n, nil
}

func (u *Page) setRateLimit(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, principal, err := u.boxAndPrincipal(r)
	if err != nil {
		return err
	}
	l := store.RateLimit{Box: b.Name, Principal: principal, UpdatedAt: u.cfg.Now().UTC()}
	var e1, e2, e3 error
	l.InputTPM, e1 = formCount(r, "input_tpm")
	l.OutputTPM, e2 = formCount(r, "output_tpm")
	l.RPM, e3 = formCount(r, "rpm")
	if errors.Join(e1, e2, e3) != nil || l.InputTPM+l.OutputTPM+l.RPM == 0 {
		return operator.Errorf(operator.Invalid,
			"Input and output tokens and requests a minute are whole numbers, 0 or more (empty or 0: no bound), and at least one is above 0.")
	}
	set := operator.RateLimitView{Principal: &principal, InputTPM: l.InputTPM, OutputTPM: l.OutputTPM, RPM: l.RPM}
	if _, err := u.op(r).SetRateLimit(r.Context(), b.Name, set); err != nil {
		return err
	}
	back(w, r, b.Name, "rate")
	return nil
}

func (u *Page) removeRateLimit(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, principal, err := u.boxAndPrincipal(r)
	if err != nil {
		return err
	}
	if err := u.op(r).RemoveRateLimit(r.Context(), b.Name, principal); err != nil {
		return err
	}
	back(w, r, b.Name, "rate-removed")
	return nil
}
