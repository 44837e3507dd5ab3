package spend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/store"
)

// refuseUnboundable returns the refusal of s's call, whose cost nothing
// bounds (why), when a budget applies to it: the box's, or its
// principal's, monthly or over another window (a window's limit is as
// easily passed as a month's). The budgets are read by the box's name,
// so a call whose box is no longer the one of that name (Config.Boxes)
// is refused as a removed box's rather than by another box's budget. It
// returns a 503 when the budgets (or the box) cannot be read, and nil
// when no budget applies.
func (m *Meter) refuseUnboundable(ctx context.Context, s settlement, why string) *capability.Error {
	for _, list := range []func(context.Context, string) ([]store.Budget, error){m.cfg.Store.ListBudgets, m.cfg.Store.ListWindowBudgets} {
		bs, err := list(ctx, s.box)
		if err != nil {
			return budgetUnreadable(err)
		}
		for _, b := range bs {
			if b.Principal == "" || b.Principal == s.principal {
				if err := m.enrolled(ctx, s); err != nil {
					return err
				}
				return Unboundable(b, why)
			}
		}
	}
	return nil
}

// enrolled returns nil when the box named s.box is the one s's call was
// admitted as (enrolled at s.created), or without Config.Boxes; else
// capability.TokenGone, or budgetUnreadable when the box cannot be read.
func (m *Meter) enrolled(ctx context.Context, s settlement) *capability.Error {
	if m.cfg.Boxes == nil {
		return nil
	}
	now, err := m.cfg.Boxes.Box(ctx, s.box)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return budgetUnreadable(err)
	}
	if err == nil && now.CreatedAt.Equal(s.created) {
		return nil
	}
	return capability.TokenGone(ctx, m.cfg.Boxes, store.Box{Name: s.box, CreatedAt: s.created})
}

// budgetUnreadable is the 503 of a call whose box's budgets could not be
// read. err is logged, never shown.
func budgetUnreadable(err error) *capability.Error {
	return capability.Refuse(capability.ReasonStore, "The broker cannot read this box's budget just now; try again shortly.").WithErr(err)
}

// Unboundable is the refusal of a call whose cost nothing in the request
// bounds (why says what) by a payer held to budget b.
func Unboundable(b store.Budget, why string) *capability.Error {
	what, args := "monthly budget", "remove "+b.Box
	if b.Window != "" {
		what, args = windowWords(b.Window)+" budget", args+" --window "+b.Window
	}
	who, remove := whose(b, what, args)
	who = strings.ToLower(who[:1]) + who[1:]
	return capability.Refuse(capability.ReasonBudget, "This call is refused because it could cost more than any bound the broker can set, and it would be paid within %s of %s: %s. "+
		"The owner can allow such calls only by removing that budget, with %s.", who, FormatUSD(b.Limit), why, remove)
}

// OverBudget is the refusal of a call whose bound would pass e's budget.
func OverBudget(e *store.OverBudgetError, bound int64) *capability.Error {
	if e.Budget.Window != "" {
		return overWindow(e, bound)
	}
	who, raise := whose(e.Budget, "monthly budget", "set "+e.Budget.Box+" AMOUNT")
	resets := "the first of next month"
	if t := Resets(e.Month); !t.IsZero() {
		resets = t.Format("2006-01-02") + " at 00:00 UTC"
	}
	left, f := leftOf(e, bound)
	used := fmt.Sprintf("%s charged and %s held for calls in flight, and this call could cost up to %s", f(e.Spent), f(e.Reserved), FormatUSD(bound))
	if left > 0 {
		used = fmt.Sprintf("what is left of it, %s (%s charged, %s held for calls in flight), is less than this call could cost up to %s",
			f(left), f(e.Spent), f(e.Reserved), FormatUSD(bound))
	}
	return capability.Refuse(capability.ReasonBudget, "%s of %s for %s is spent: %s. It resets on %s; the owner can raise it with %s.",
		who, FormatUSD(e.Budget.Limit), e.Month, used, resets, raise)
}

// whose names budget b, a what ("monthly budget"), as a sentence begins,
// and the command that changes it: `boxbroker budget ARGS`, with b's
// --principal when it has one.
func whose(b store.Budget, what, args string) (who, command string) {
	if b.Principal == "" {
		return "This box's " + what, "`boxbroker budget " + args + "`"
	}
	return "The " + what + " for " + b.Principal + " on this box", "`boxbroker budget " + args + " --principal " + b.Principal + "`"
}

// leftOf is what is left of e's budget, and a formatter that writes it,
// the budget and its figures, and bound, with the decimals the finest of
// them needs: $0.000000 charged stands beside a $0.000001 budget rather
// than $0.00.
func leftOf(e *store.OverBudgetError, bound int64) (int64, func(int64) string) {
	left := max(e.Budget.Limit-e.Spent-e.Reserved, 0)
	return left, usdAlike(e.Budget.Limit, e.Spent, e.Reserved, bound, left)
}

// windowWords names the window a budget is over, as a refusal does
// ("daily", say): its own name when it is none store.ParseWindow reads.
func windowWords(window string) string {
	if w, err := store.ParseWindow(window); err == nil {
		return w.Describe()
	}
	return window
}

// overWindow is the refusal of a call whose bound would pass e's window
// budget (e.Budget.Window set; e.Month is the window's current bucket).
func overWindow(e *store.OverBudgetError, bound int64) *capability.Error {
	w, err := store.ParseWindow(e.Budget.Window)
	what := e.Budget.Window + " budget"
	resets := "when its window moves on"
	if err == nil {
		what = w.Describe() + " budget"
		if at, perr := time.Parse(time.DateOnly, e.Month); perr == nil {
			resets = w.Resets(at).Format("2006-01-02") + " at 00:00 UTC"
		}
	}
	who, raise := whose(e.Budget, what, "set "+e.Budget.Box+" AMOUNT --window "+e.Budget.Window)
	left, f := leftOf(e, bound)
	return capability.Refuse(capability.ReasonBudget, "%s of %s is spent: %s left (%s charged, %s held for calls in flight), and this call could cost up to %s. "+
		"It next frees spending on %s; the owner can raise it with %s.",
		who, FormatUSD(e.Budget.Limit), f(left), f(e.Spent), f(e.Reserved), FormatUSD(bound), resets, raise)
}
