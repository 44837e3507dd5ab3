package spend

import (
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/store"
)

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
	who, raise := "This box's "+what, fmt.Sprintf("`boxbroker budget set %s AMOUNT --window %s`", e.Budget.Box, e.Budget.Window)
	if e.Budget.Principal != "" {
		who = "The " + what + " for " + e.Budget.Principal + " on this box"
		raise = fmt.Sprintf("`boxbroker budget set %s AMOUNT --window %s --principal %s`", e.Budget.Box, e.Budget.Window, e.Budget.Principal)
	}
	left := max(e.Budget.Limit-e.Spent-e.Reserved, 0)
	f := usdAlike(e.Budget.Limit, e.Spent, e.Reserved, bound, left)
	return capability.Refuse(capability.ReasonBudget, "%s of %s is spent: %s left (%s charged, %s held for calls in flight), and this call could cost up to %s. "+
		"It next frees spending on %s; the owner can raise it with %s.",
		who, FormatUSD(e.Budget.Limit), f(left), f(e.Spent), f(e.Reserved), FormatUSD(bound), resets, raise)
}
