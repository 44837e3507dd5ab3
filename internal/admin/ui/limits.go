package ui

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// formPrincipal reads the form's principal ("" for the box's own).
func formPrincipal(f *formPost) (string, error) {
	p := f.get("principal")
	return operator.BudgetPrincipal(&p)
}

// setWindowBudget sets a budget by day, week or rolling days.
func setWindowBudget(f *formPost) error {
	principal, err := formPrincipal(f)
	if err != nil {
		return err
	}
	window := f.get("window")
	if _, err := store.ParseWindow(window); err != nil {
		return operator.Errorf(operator.Invalid, "The window is day, week, or Nd for a rolling N days (1 to %d), such as 7d.", store.MaxRollingDays)
	}
	usd, err := formUSD(f)
	if err != nil {
		return err
	}
	_, err = f.op.SetWindowBudget(f.ctx(), f.box, operator.WindowBudgetSetting{Window: window, USD: json.Number(usd), Principal: &principal})
	return err
}

// formUSD reads a form's usd field, a budget in dollars ("$" allowed).
func formUSD(f *formPost) (string, error) {
	usd := strings.TrimPrefix(f.get("usd"), "$")
	if _, err := spend.ParseUSD(usd); err != nil {
		return "", operator.Errorf(operator.Invalid,
			"A budget is in dollars from 0 to %d with at most six decimals, such as 25 or 25.50.", spend.MaxUSD)
	}
	return usd, nil
}

// formCount reads a form's count field: empty is 0.
func formCount(f *formPost, name string) (int64, error) {
	v := f.get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New(name)
	}
	return n, nil
}

// setRateLimit sets a rate limit of input and output tokens and
// requests a minute.
func setRateLimit(f *formPost) error {
	principal, err := formPrincipal(f)
	if err != nil {
		return err
	}
	in, e1 := formCount(f, "input_tpm")
	out, e2 := formCount(f, "output_tpm")
	rpm, e3 := formCount(f, "rpm")
	if errors.Join(e1, e2, e3) != nil || in+out+rpm == 0 {
		return operator.Errorf(operator.Invalid,
			"Input and output tokens and requests a minute are whole numbers, 0 or more (empty or 0: no bound), and at least one is above 0.")
	}
	_, err = f.op.SetRateLimit(f.ctx(), f.box, operator.RateLimitView{Principal: &principal, InputTPM: in, OutputTPM: out, RPM: rpm})
	return err
}
