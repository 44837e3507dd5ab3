package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Money is kept in micro-dollars: millionths of a US dollar, as an int64,
// so that sums are exact and no cost is ever rounded to zero.

// Budget is a monthly limit on what a box may spend through the broker, in
// micro-dollars. Principal "" is the box's own budget, on every call it
// makes whoever pays; any other Principal is a budget on the box's calls
// paid by that principal.
type Budget struct {
	Box       string
	Principal string
	// Window is the span the limit holds over: "" for the calendar
	// month (Spend's budgets), else a window Windows keeps (see Window).
	Window    string `json:",omitempty"`
	Limit     int64
	UpdatedAt time.Time
}

// Tally is what has been charged (Spent) and is held for calls in flight
// (Reserved), in micro-dollars, against a box (Principal "") or one
// principal on that box, in one calendar month (UTC, written YYYY-MM). A
// tally is kept whether or not a budget is set, so a budget set mid-month
// counts what was spent before it.
type Tally struct {
	Box       string
	Principal string
	Month     string
	Spent     int64
	Reserved  int64
}

// Usage is the measured usage of a box's model calls in one month (UTC,
// YYYY-MM), by payer kind, principal ("" for none) and model.
type Usage struct {
	Box       string
	Month     string
	PayerKind string
	Principal string
	Model     string
	// Calls counts the calls answered. Unpriced counts those whose model
	// has no price, and Unmeasured those whose usage could not be read
	// whole (an answer cut off, say); neither is ever counted in Cost.
	Calls      int64
	Unpriced   int64
	Unmeasured int64
	// The tokens the upstream reported.
	InputTokens      int64
	OutputTokens     int64
	CacheWriteTokens int64
	CacheReadTokens  int64
	// Cost is what the priced, measured calls cost, in micro-dollars.
	Cost int64
}

// Add adds o's counts, tokens and cost to u, each sum held at the
// int64's bound (AddCapped) rather than wrapping.
func (u *Usage) Add(o Usage) {
	u.Calls = AddCapped(u.Calls, o.Calls)
	u.Unpriced = AddCapped(u.Unpriced, o.Unpriced)
	u.Unmeasured = AddCapped(u.Unmeasured, o.Unmeasured)
	u.InputTokens = AddCapped(u.InputTokens, o.InputTokens)
	u.OutputTokens = AddCapped(u.OutputTokens, o.OutputTokens)
	u.CacheWriteTokens = AddCapped(u.CacheWriteTokens, o.CacheWriteTokens)
	u.CacheReadTokens = AddCapped(u.CacheReadTokens, o.CacheReadTokens)
	u.Cost = AddCapped(u.Cost, o.Cost)
}

// AddCapped is a+b, held at math.MaxInt64 or math.MinInt64 where the sum
// would wrap: a sum of counts never turns negative.
func AddCapped(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// Reservation is an upper bound on one call's cost, in micro-dollars,
// held against the tallies of Box and of Principal ("" for none) in Month
// until the call settles. ID is set by Reserve.
type Reservation struct {
	ID        int64
	Box       string
	Principal string
	Month     string
	Amount    int64
	// At is the reservation's time, which its lease runs from; zero
	// stamps it with the store's clock (the database's).
	At time.Time
	// WindowAt is the time the buckets of its window budgets are told by
	// (as a settlement's At); zero: At, or the replica's clock when At
	// is zero too.
	WindowAt time.Time
	// BoxCreated, when not zero, is the CreatedAt of the box as its call
	// was admitted: the box named Box that was enrolled then is the one
	// held to its budgets, and no other. A box added under its name since
	// that box was removed is another box: nothing is held against it,
	// and Reserve returns 0 as for a box with no budget (a rotation of
	// the box's token leaves it the same box). Zero: whichever box has
	// the name.
	BoxCreated time.Time
}

// Settlement ends one call: it releases its reservation (Reservation is
// its ID, 0 for none), charges Charge to the Month's tallies of Box and of
// Principal (when not ""), adds each of Usage to the usage kept, and each
// of Cache to the prompt-cache use kept for its box, payer kind, entry
// and hour (see PromptCache).
type Settlement struct {
	Reservation int64
	Box         string
	Principal   string
	Month       string
	Charge      int64
	Usage       []Usage
	Cache       []CacheUsage `json:",omitempty"`
	// At is when the call ended: the window budgets' buckets it is
	// charged to are told by it (zero: when it is applied).
	At time.Time `json:",omitzero"`
	// BoxCreated, when not zero, is the CreatedAt of the box as its call
	// was admitted (its Reservation's BoxCreated): the settlement is
	// that box's, and charges no other. One of a box removed since, and
	// another added under its name, charges nothing and adds no usage
	// (its reservation went with the box it was held against), as one
	// of a box removed; a rotation of the box's token leaves it the same
	// box. Zero (a settlement kept without it): whichever box has the
	// name.
	BoxCreated time.Time `json:",omitzero"`
}

// ErrOverBudget is what Reserve's *OverBudgetError matches with errors.Is.
var ErrOverBudget = errors.New("over budget")

// OverBudgetError is a reservation refused: Budget's limit would be passed
// in Month, whose tally stood at Spent and Reserved.
type OverBudgetError struct {
	Budget   Budget
	Month    string
	Spent    int64
	Reserved int64
}

func (e *OverBudgetError) Error() string {
	if e.Budget.Principal == "" {
		return fmt.Sprintf("box %q is over its budget for %s", e.Budget.Box, e.Month)
	}
	return fmt.Sprintf("principal %q is over its budget on box %q for %s", e.Budget.Principal, e.Budget.Box, e.Month)
}

// Is makes errors.Is(err, ErrOverBudget) true.
func (e *OverBudgetError) Is(target error) bool { return target == ErrOverBudget }

// Spend keeps budgets, the tallies charged against them, reservations for
// calls in flight, and measured usage. None of it is cached, so none of its
// writes are in the changes log.
type Spend interface {
	// Windows are the budgets over other windows than the month, which
	// Reserve holds a call to as well: what holds a call to its budgets
	// reads both.
	Windows
	// SetBudget creates or replaces the budget of b.Box and b.Principal;
	// ErrNotFound if there is no such box.
	SetBudget(ctx context.Context, b Budget) error
	// ListBudgets returns a box's budgets, the box's own first, then by
	// principal.
	ListBudgets(ctx context.Context, box string) ([]Budget, error)
	// DeleteBudget removes a budget; ErrNotFound if none.
	DeleteBudget(ctx context.Context, box, principal string) error
	// Reserve holds r.Amount against the budgets that apply to r — the
	// box's, and r.Principal's on that box when r.Principal is not "" —
	// for r.Month, in one transaction in which each budget's tally is
	// raised by one conditional update (Spent + Reserved + Amount must not
	// pass the limit), never by reading and then writing. When a budget
	// would be passed nothing is held and it returns an *OverBudgetError
	// naming the first such budget (the box's before the principal's).
	// When no budget applies nothing is held and it returns 0. Otherwise
	// it returns the reservation's ID, for Settle.
	Reserve(ctx context.Context, r Reservation) (int64, error)
	// Settle applies s in one transaction. A reservation already released
	// (by ReleaseExpired) is not an error: the charge is made all the same.
	// ErrNotFound, and nothing applied, when s's box is gone (or is
	// another than s.BoxCreated names).
	Settle(ctx context.Context, s Settlement) error
	// ReleaseExpired releases every reservation stamped, or last renewed,
	// more than lease ago (those of a process that ended mid-call) by the
	// store's clock (the database's, as
	// Reserve and RenewReservations stamp a zero time), and returns how
	// many it released: the replicas sharing a store judge leases by
	// its one clock, whatever their own say.
	ReleaseExpired(ctx context.Context, lease time.Duration) (int, error)
	// RenewReservations sets the time of each reservation in ids still
	// held to at (zero: the store's clock); those already released are
	// skipped. Reservations are leases: a running broker renews those of
	// its calls in flight, and ReleaseExpired frees those no one renewed,
	// so a replica that crashed mid-call holds its callers' budgets only
	// until its leases run out.
	RenewReservations(ctx context.Context, ids []int64, at time.Time) error
	// Tallies returns a box's tallies for month, the box's own (Principal
	// "") first, then by principal; none for a month with none.
	Tallies(ctx context.Context, box, month string) ([]Tally, error)
	// ListUsage returns a box's usage for month, by payer kind, principal
	// and model.
	ListUsage(ctx context.Context, box, month string) ([]Usage, error)
}
