package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A budget's Window is the span its limit holds over. "" is the calendar
// month (UTC), kept by Spend's budgets; the others are kept by Windows:
//
//   - "day": the UTC calendar day;
//   - "week": the ISO week, Monday 00:00 UTC to the next Monday;
//   - "Nd" (1d to 366d): the rolling N days, today (UTC) and the N−1
//     days before it.
//
// Money over a window is tallied in buckets of one day (or one week, for
// "week"), named by their first day, written YYYY-MM-DD; a window counts
// the buckets from Window.From to Window.Bucket of the instant.
type Window struct {
	kind string // "day", "week" or "rolling"
	days int    // for "rolling": N
}

// MaxRollingDays bounds N in a rolling window "Nd".
const MaxRollingDays = 366

// ParseWindow reads a window's name: "day", "week" or "Nd" with N from 1
// to MaxRollingDays. "month" and "" are not Windows (they are Spend's
// monthly budgets) and are refused, as is anything else.
func ParseWindow(s string) (Window, error) {
	switch s {
	case "day":
		return Window{kind: "day"}, nil
	case "week":
		return Window{kind: "week"}, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d >= 1 && d <= MaxRollingDays && strconv.Itoa(d) == n {
			return Window{kind: "rolling", days: d}, nil
		}
	}
	return Window{}, fmt.Errorf("window %q: want day, week, or Nd for a rolling N days (1 to %d)", s, MaxRollingDays)
}

// start is the first instant of the bucket t falls in.
func (w Window) start(t time.Time) time.Time {
	t = t.UTC()
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	if w.kind == "week" {
		d = d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	}
	return d
}

// Bucket is the name of the bucket t is charged to.
func (w Window) Bucket(t time.Time) string { return w.start(t).Format(time.DateOnly) }

// From is the name of the oldest bucket the window counts at t.
func (w Window) From(t time.Time) string {
	s := w.start(t)
	if w.kind == "rolling" {
		s = s.AddDate(0, 0, 1-w.days)
	}
	return s.Format(time.DateOnly)
}

// To is the last day the window counts at t: t's day, or for "week" the
// Sunday that ends t's ISO week (its bucket is named by its Monday).
func (w Window) To(t time.Time) string {
	s := w.start(t)
	if w.kind == "week" {
		s = s.AddDate(0, 0, 6)
	}
	return s.Format(time.DateOnly)
}

// Resets is when the window next lets go of spending it counts at t: the
// next day or week for a calendar window, the next day (when its oldest
// day leaves it) for a rolling one.
func (w Window) Resets(t time.Time) time.Time {
	s := w.start(t)
	if w.kind == "week" {
		return s.AddDate(0, 0, 7)
	}
	return s.AddDate(0, 0, 1)
}

// Describe is w in words: "daily", "weekly", "rolling 7-day".
func (w Window) Describe() string {
	switch w.kind {
	case "day":
		return "daily"
	case "week":
		return "weekly"
	}
	return fmt.Sprintf("rolling %d-day", w.days)
}

// WindowTally is what a window budget counts at an instant: Spent charged
// and Reserved held for calls in flight, in micro-dollars, over the
// buckets From to Bucket.
type WindowTally struct {
	Budget   Budget
	From     string
	Bucket   string
	Spent    int64
	Reserved int64
}

// Windows keeps budgets over windows other than the calendar month (see
// Window): a box's own (Principal "") or a principal's on it, several at
// once (one per window). A call's reservation (Spend.Reserve) holds its
// amount against every window budget that applies as it does against the
// monthly ones, in the same transaction and by the same rule — the
// window's spent and reserved plus the amount must not pass the limit,
// checked while the budget's row is locked — and its settlement releases
// what it held and charges the window's current bucket. A window budget
// refused is an *OverBudgetError whose Budget.Window is set and whose
// Month is the window's current bucket.
type Windows interface {
	// SetWindowBudget creates or replaces the budget of b.Box,
	// b.Principal and b.Window (a name ParseWindow reads); ErrNotFound if
	// there is no such box.
	SetWindowBudget(ctx context.Context, b Budget) error
	// ListWindowBudgets returns a box's window budgets, the box's own
	// first, then by principal, then by window.
	ListWindowBudgets(ctx context.Context, box string) ([]Budget, error)
	// DeleteWindowBudget removes a window budget; ErrNotFound if none.
	DeleteWindowBudget(ctx context.Context, box, principal, window string) error
	// WindowTallies returns what each of a box's window budgets counts
	// at at, in ListWindowBudgets' order.
	WindowTallies(ctx context.Context, box string, at time.Time) ([]WindowTally, error)
}

// BudgetAlert is a budget's spending (Spent, charged and held) having
// crossed Threshold percent of its Limit in Period: the month (YYYY-MM)
// of a monthly budget (Window ""), or the current bucket (YYYY-MM-DD) of
// a window budget.
type BudgetAlert struct {
	Box       string
	Principal string
	Window    string
	Period    string
	Threshold int
	Limit     int64
	Spent     int64
	At        time.Time
}

// Alerts records budget alerts, each crossing once.
type Alerts interface {
	// MarkAlert records a and reports whether this call recorded it:
	// false when the same crossing (box, principal, window, period and
	// threshold) was recorded before, by this replica or another.
	// ErrNotFound if there is no such box.
	MarkAlert(ctx context.Context, a BudgetAlert) (bool, error)
	// ListAlerts returns a box's alerts, newest first, at most limit.
	ListAlerts(ctx context.Context, box string, limit int) ([]BudgetAlert, error)
}
