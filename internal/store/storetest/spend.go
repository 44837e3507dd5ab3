package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

func testBudgets(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	seq := lastChange(t, s)
	budgets := []store.Budget{
		{Box: "alpha", Principal: "github:zed", Limit: 5_000_000, UpdatedAt: at(1)},
		{Box: "alpha", Principal: "", Limit: 25_000_000, UpdatedAt: at(2)},
		{Box: "alpha", Principal: "github:ann", Limit: 1, UpdatedAt: at(3)},
	}
	c := concept[store.Budget]{set: "SetBudget", del: "DeleteBudget", key: func(b store.Budget) string { return fmt.Sprintf("%q, %q", b.Box, b.Principal) },
		write: s.SetBudget, remove: func(ctx context.Context, b store.Budget) error { return s.DeleteBudget(ctx, b.Box, b.Principal) }}
	c.sets(t, budgets...)
	replaced := store.Budget{Box: "alpha", Principal: "github:ann", Limit: 2_500_000, UpdatedAt: at(4)}
	c.replaces(t, replaced)
	want := []store.Budget{budgets[1], replaced, budgets[0]}
	answer(s.ListBudgets(ctx, "alpha")).is(t, "ListBudgets(alpha)", want)
	// Each write of a budget is logged, so caches of which boxes have one drop it.
	budgetChange := store.Change{Kind: store.ChangeBudget, Key: "alpha"}
	same(t, fmt.Sprintf("changes of SetBudget ×%d", len(budgets)+1), slices.Repeat([]store.Change{budgetChange}, len(budgets)+1), keys(changesAfter(t, s, seq)))
	seq = lastChange(t, s)

	wantErr(t, "SetBudget(no box)", s.SetBudget(ctx, store.Budget{Box: "nobox", Limit: 1, UpdatedAt: at(1)}), store.ErrNotFound)
	if err := s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: -1, UpdatedAt: at(1)}); err == nil {
		t.Errorf("SetBudget(limit -1) = nil, want an error")
	}
	c.removes(t, budgets[0])
	wantErr(t, "DeleteBudget(nobox, \"\")", s.DeleteBudget(ctx, "nobox", ""), store.ErrNotFound)
	same(t, "changes of DeleteBudget", []store.Change{budgetChange}, keys(changesAfter(t, s, seq)))
	answer(s.ListBudgets(ctx, "alpha")).is(t, "ListBudgets(alpha) after delete", []store.Budget{budgets[1], replaced})
	answer(s.ListBudgets(ctx, "nobox")).none(t, "ListBudgets(nobox)")
}

// tallies returns s.Tallies(box, month), failing on error.
func tallies(t *testing.T, s store.Store, box, month string) []store.Tally {
	t.Helper()
	return answer(s.Tallies(t.Context(), box, month)).must(t, fmt.Sprintf("Tallies(%q, %q)", box, month))
}

func reserve(t *testing.T, s store.Store, box, principal, month string, amount int64) (int64, error) {
	t.Helper()
	return s.Reserve(t.Context(), store.Reservation{Box: box, Principal: principal, Month: month, Amount: amount, At: at(0)})
}

func testReserveAndSettle(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	seq := lastChange(t, s)

	// No budget: nothing is held, and a settlement still charges the tally.
	id, err := reserve(t, s, "alpha", "", "2026-10", 700)
	if id != 0 || err != nil {
		t.Fatalf("Reserve(no budget) = %d, %v, want 0, nil", id, err)
	}
	wantErr(t, "Settle(no reservation)", s.Settle(ctx, store.Settlement{Box: "alpha", Month: "2026-10", Charge: 300}), nil)
	same(t, "Tallies after a charge with no budget", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 300}}, tallies(t, s, "alpha", "2026-10"))

	// A budget set mid-month counts what was spent before it.
	wantErr(t, "SetBudget(alpha, 1000)", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1000, UpdatedAt: at(1)}), nil)
	first := answer(reserve(t, s, "alpha", "", "2026-10", 400)).held(t, "Reserve(400 of 700 left)")
	next, err := reserve(t, s, "alpha", "", "2026-10", 300)
	if next == 0 || next == first || err != nil {
		t.Fatalf("Reserve(300 of 300 left) = %d, %v, want a new ID, nil", next, err)
	}
	_, err = reserve(t, s, "alpha", "", "2026-10", 1)
	var obe *store.OverBudgetError
	if !errors.As(err, &obe) || !errors.Is(err, store.ErrOverBudget) {
		t.Fatalf("Reserve(1 of 0 left) = %v, want an *OverBudgetError", err)
	}
	wantOver := store.OverBudgetError{Budget: store.Budget{Box: "alpha", Limit: 1000}, Month: "2026-10", Spent: 300, Reserved: 700}
	same(t, "Reserve(1 of 0 left) error", wantOver, *obe)
	// Another month is another tally.
	answer(reserve(t, s, "alpha", "", "2026-11", 1000)).held(t, "Reserve(1000 in 2026-11)")

	// Settling releases the reservation and charges what was measured.
	wantErr(t, "Settle(first, 250)", s.Settle(ctx, store.Settlement{Reservation: first, Box: "alpha", Month: "2026-10", Charge: 250}), nil)
	same(t, "Tallies after settling", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 550, Reserved: 300}}, tallies(t, s, "alpha", "2026-10"))
	// Settling the same reservation again releases nothing more.
	wantErr(t, "Settle(first) again", s.Settle(ctx, store.Settlement{Reservation: first, Box: "alpha", Month: "2026-10"}), nil)
	same(t, "Tallies after settling twice", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 550, Reserved: 300}}, tallies(t, s, "alpha", "2026-10"))
	answer(reserve(t, s, "alpha", "", "2026-10", 150)).held(t, "Reserve(150 of 150 left)")
	wantErr(t, "Reserve(1 of 0 left)", second(reserve(t, s, "alpha", "", "2026-10", 1)), store.ErrOverBudget)
	// A settlement may charge past the limit (a call that cost more than
	// its bound); the next reservation is refused.
	wantErr(t, "Settle(second, 900)", s.Settle(ctx, store.Settlement{Reservation: next, Box: "alpha", Month: "2026-10", Charge: 900}), nil)
	wantErr(t, "Reserve after overspending", second(reserve(t, s, "alpha", "", "2026-10", 1)), store.ErrOverBudget)
	// Raising the limit lets calls through again.
	wantErr(t, "SetBudget(alpha, 5000)", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 5000, UpdatedAt: at(2)}), nil)
	answer(reserve(t, s, "alpha", "", "2026-10", 1000)).held(t, "Reserve after raising the limit")
	wantErr(t, "Settle(no box)", s.Settle(ctx, store.Settlement{Box: "nobox", Month: "2026-10", Charge: 1}), store.ErrNotFound)
	// Reserve and Settle log nothing; the budgets set between them do.
	for _, c := range changesAfter(t, s, seq) {
		if c.Kind != store.ChangeBudget {
			t.Errorf("Reserve and Settle recorded change %s %q, want none", c.Kind, c.Key)
		}
	}
}

func testReservePrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const m = "2026-10"
	wantErr(t, "SetBudget(ann)", s.SetBudget(ctx, store.Budget{Box: "alpha", Principal: "github:ann", Limit: 100, UpdatedAt: at(1)}), nil)

	// Only ann's budget applies to ann; nobody else's calls are held.
	answer(reserve(t, s, "alpha", "github:bob", m, 1_000_000)).is(t, "Reserve(bob, no budget)", 0)
	annID := answer(reserve(t, s, "alpha", "github:ann", m, 60)).held(t, "Reserve(ann, 60 of 100)")
	_, err := reserve(t, s, "alpha", "github:ann", m, 41)
	var obe *store.OverBudgetError
	if !errors.As(err, &obe) || obe.Budget.Principal != "github:ann" {
		t.Fatalf("Reserve(ann, 41 of 40) = %v, want ann's *OverBudgetError", err)
	}
	// The box's tally carries ann's reservation too.
	want := []store.Tally{{Box: "alpha", Month: m, Reserved: 60}, {Box: "alpha", Principal: "github:ann", Month: m, Reserved: 60}}
	same(t, "Tallies", want, tallies(t, s, "alpha", m))

	// With a box budget too, the box's is checked first.
	wantErr(t, "SetBudget(box)", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 80, UpdatedAt: at(2)}), nil)
	_, err = reserve(t, s, "alpha", "github:ann", m, 30)
	if !errors.As(err, &obe) || obe.Budget.Principal != "" || obe.Reserved != 60 {
		t.Errorf("Reserve(ann, 30; box has 20 left) = %v, want the box's *OverBudgetError", err)
	}
	_, err = reserve(t, s, "alpha", "github:bob", m, 30)
	if !errors.As(err, &obe) || obe.Budget.Principal != "" {
		t.Errorf("Reserve(bob, 30; box has 20 left) = %v, want the box's *OverBudgetError", err)
	}
	bobID := answer(reserve(t, s, "alpha", "github:bob", m, 20)).held(t, "Reserve(bob, 20 of 20)")
	// A refused reservation holds nothing on either tally.
	want = []store.Tally{
		{Box: "alpha", Month: m, Reserved: 80},
		{Box: "alpha", Principal: "github:ann", Month: m, Reserved: 60},
		{Box: "alpha", Principal: "github:bob", Month: m, Reserved: 20},
	}
	same(t, "Tallies after refusals", want, tallies(t, s, "alpha", m))
	wantErr(t, "Settle(ann)", s.Settle(ctx, store.Settlement{Reservation: annID, Box: "alpha", Principal: "github:ann", Month: m, Charge: 10}), nil)
	wantErr(t, "Settle(bob)", s.Settle(ctx, store.Settlement{Reservation: bobID, Box: "alpha", Principal: "github:bob", Month: m, Charge: 5}), nil)
	want = []store.Tally{
		{Box: "alpha", Month: m, Spent: 15},
		{Box: "alpha", Principal: "github:ann", Month: m, Spent: 10},
		{Box: "alpha", Principal: "github:bob", Month: m, Spent: 5},
	}
	same(t, "Tallies after settling", want, tallies(t, s, "alpha", m))
}

// testConcurrentReserve is the budget's guarantee: however many reserve at
// once, what is held never passes the limit.
func testConcurrentReserve(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const m, n, amount, limit = "2026-10", 50, 10, 105
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Principal: "", Limit: limit, UpdatedAt: at(1)}), nil)
	wantErr(t, "SetBudget(ann)", s.SetBudget(ctx, store.Budget{Box: "alpha", Principal: "github:ann", Limit: 1000, UpdatedAt: at(1)}), nil)
	ids, refused := reserveAtOnce(t, s, n, func(i int) store.Reservation {
		principal := ""
		if i%2 == 0 {
			principal = "github:ann"
		}
		return store.Reservation{Box: "alpha", Principal: principal, Month: m, Amount: amount, At: at(0)}
	})
	if len(ids) != limit/amount || refused != n-limit/amount {
		t.Errorf("%d concurrent Reserve(%d) against %d: %d held, %d refused, want %d, %d", n, amount, limit, len(ids), refused, limit/amount, n-limit/amount)
	}
	ts := tallies(t, s, "alpha", m)
	if len(ts) == 0 || ts[0].Principal != "" || ts[0].Reserved != int64(len(ids))*amount || ts[0].Reserved > limit {
		t.Errorf("Tallies = %+v, want the box's reserved %d, at most %d", ts, int64(len(ids))*amount, limit)
	}
}

// testConcurrentReservePrincipalCeiling: reservations made at once, each
// held against the box's budget and then refused by its principal's,
// leave nothing held against the box's for those refused, even where a
// store makes concurrent reservations in one transaction.
func testConcurrentReservePrincipalCeiling(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const m, n, amount, limit = "2026-10", 40, 10, 55
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Principal: "", Limit: 1 << 40, UpdatedAt: at(1)}), nil)
	wantErr(t, "SetBudget(ann)", s.SetBudget(ctx, store.Budget{Box: "alpha", Principal: "github:ann", Limit: limit, UpdatedAt: at(1)}), nil)
	ids, refused := reserveAtOnce(t, s, n, func(int) store.Reservation {
		return store.Reservation{Box: "alpha", Principal: "github:ann", Month: m, Amount: amount, At: at(0)}
	})
	held := len(ids)
	if held != limit/amount || refused != n-limit/amount {
		t.Errorf("%d concurrent Reserve(%d) against ann's %d: %d held, %d refused, want %d, %d", n, amount, limit, held, refused, limit/amount, n-limit/amount)
	}
	want := []store.Tally{{Box: "alpha", Month: m, Reserved: int64(held) * amount}, {Box: "alpha", Principal: "github:ann", Month: m, Reserved: int64(held) * amount}}
	same(t, "Tallies after concurrent reservations", want, tallies(t, s, "alpha", m))
}

// reserveAtOnce makes n reservations at once, the i'th being r(i), and
// returns the ids of those held and how many were refused as over
// budget; any other error fails the test.
func reserveAtOnce(t *testing.T, s store.Store, n int, r func(i int) store.Reservation) (ids []int64, refused int) {
	t.Helper()
	made := make([]int64, n)
	var failed []error
	for i, err := range atOnce(n, func(i int) (err error) { made[i], err = s.Reserve(t.Context(), r(i)); return err }) {
		switch {
		case err == nil:
			ids = append(ids, made[i])
		case errors.Is(err, store.ErrOverBudget):
			refused++
		default:
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("Reserve failed: %v", failed)
	}
	return ids, refused
}

func testReleaseStale(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const m = "2026-10"
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 100, UpdatedAt: at(1)}), nil)
	old := answer(s.Reserve(ctx, store.Reservation{Box: "alpha", Principal: "github:ann", Month: m, Amount: 70, At: at(0)})).must(t, "Reserve(old)")
	must(t, "Reserve(new)", second(s.Reserve(ctx, store.Reservation{Box: "alpha", Month: m, Amount: 20, At: at(10)})))
	n, err := releaseBefore(ctx, s, at(5))
	if n != 1 || err != nil {
		t.Fatalf("releaseBefore(at 5) = %d, %v, want 1, nil", n, err)
	}
	want := []store.Tally{{Box: "alpha", Month: m, Reserved: 20}, {Box: "alpha", Principal: "github:ann", Month: m}}
	same(t, "Tallies after releaseBefore", want, tallies(t, s, "alpha", m))
	// The call that held it settles late: charged, nothing released twice.
	wantErr(t, "Settle(released)", s.Settle(ctx, store.Settlement{Reservation: old, Box: "alpha", Principal: "github:ann", Month: m, Charge: 30}), nil)
	want = []store.Tally{{Box: "alpha", Month: m, Spent: 30, Reserved: 20}, {Box: "alpha", Principal: "github:ann", Month: m, Spent: 30}}
	same(t, "Tallies after a late Settle", want, tallies(t, s, "alpha", m))
	answer(releaseBefore(ctx, s, at(5))).is(t, "releaseBefore(at 5) again", 0)
}

func testUsage(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	u := func(kind, principal, model string, calls, cost int64) store.Usage {
		return store.Usage{Box: "alpha", Month: "2026-10", PayerKind: kind, Principal: principal, Model: model,
			Calls: calls, InputTokens: 10 * calls, OutputTokens: 20 * calls, CacheWriteTokens: 3 * calls, CacheReadTokens: 4 * calls, Cost: cost}
	}
	unpriced := u("shared", "", "claude-new", 1, 0)
	unpriced.Unpriced, unpriced.Unmeasured = 1, 1
	settlements := []store.Settlement{
		{Box: "alpha", Month: "2026-10", Charge: 5, Usage: []store.Usage{u("shared", "", "claude-sonnet-4-5", 1, 5)}},
		{Box: "alpha", Month: "2026-10", Principal: "github:ann", Charge: 7, Usage: []store.Usage{u("visitor", "github:ann", "claude-haiku-4-5", 1, 7)}},
		{Box: "alpha", Month: "2026-10", Charge: 9, Usage: []store.Usage{u("shared", "", "claude-sonnet-4-5", 2, 9), unpriced}},
		{Box: "alpha", Month: "2026-11", Charge: 1, Usage: []store.Usage{{Box: "alpha", Month: "2026-11", PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 1, Cost: 1}}},
	}
	for i, st := range settlements {
		wantErr(t, fmt.Sprintf("Settle(%d)", i), s.Settle(ctx, st), nil)
	}
	want := []store.Usage{unpriced, u("shared", "", "claude-sonnet-4-5", 3, 14), u("visitor", "github:ann", "claude-haiku-4-5", 1, 7)}
	answer(s.ListUsage(ctx, "alpha", "2026-10")).is(t, "ListUsage(alpha, 2026-10)", want)
	answer(s.ListUsage(ctx, "alpha", "2026-09")).none(t, "ListUsage(alpha, 2026-09)")
	wantT := []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 21}, {Box: "alpha", Principal: "github:ann", Month: "2026-10", Spent: 7}}
	same(t, "Tallies(alpha, 2026-10)", wantT, tallies(t, s, "alpha", "2026-10"))
}

func testSpendGoesWithBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 100, UpdatedAt: at(1)}), nil)
	must(t, "Reserve", second(reserve(t, s, "alpha", "", "2026-10", 10)))
	wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Box: "alpha", Month: "2026-10", Charge: 3,
		Usage: []store.Usage{{Box: "alpha", Month: "2026-10", PayerKind: "shared", Model: "m", Calls: 1, Cost: 3}}}), nil)
	wantErr(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"), nil)
	mustCreateBox(t, s, "alpha")
	answer(s.ListBudgets(ctx, "alpha")).none(t, "ListBudgets of a box made anew")
	if got := tallies(t, s, "alpha", "2026-10"); len(got) != 0 {
		t.Errorf("Tallies of a box made anew = %v, want none", got)
	}
	answer(s.ListUsage(ctx, "alpha", "2026-10")).none(t, "ListUsage of a box made anew")
	answer(releaseBefore(ctx, s, at(100))).is(t, "releaseBefore after the box went", 0)
}

// testSpendOfAReenrolledBox: a call's reservation and settlement name the
// box as it was enrolled (BoxCreated). A box removed, and another added
// under its name, is another box: a call of the removed box reserves
// nothing against the new box's budgets, and its settlement, alone or in
// a spooled batch beside the new box's own, charges the new box nothing
// and adds it no usage. A rotation of the box's token with no grace
// leaves it the same box, whose calls are held and charged. A
// reservation or settlement that names no enrolment (one spooled
// without it) is the named box's.
func testSpendOfAReenrolledBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	const m = "2026-10"
	reserveOf := func(created time.Time, amount int64) (int64, error) {
		return s.Reserve(ctx, store.Reservation{Box: "alpha", BoxCreated: created, Month: m, Amount: amount, At: at(2)})
	}
	usage := func(calls int64) []store.Usage {
		return []store.Usage{{Box: "alpha", Month: m, PayerKind: "shared", Model: "m", Calls: calls, Cost: calls}}
	}
	old := mustCreateBox(t, s, "alpha")
	must(t, "SetBudget(alpha)", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1000, UpdatedAt: at(1)}))
	// old.CreatedAt is to the nanosecond, as a box's own is not kept:
	// it names the box all the same.
	held := answer(reserveOf(old.CreatedAt, 100)).held(t, "Reserve(the box's call)")

	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(5), PayerKind: "shared"}))
	must(t, "SetBudget(alpha anew)", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 50, UpdatedAt: at(6)}))
	created := answer(s.Box(ctx, "alpha")).must(t, "Box(alpha anew)").CreatedAt

	answer(reserveOf(old.CreatedAt, 100)).is(t, "Reserve(a call of the removed box, past the new box's budget)", 0)
	wantErr(t, "Settle(a call of the removed box)", s.Settle(ctx, store.Settlement{Reservation: held, Box: "alpha", BoxCreated: old.CreatedAt,
		Month: m, Charge: 70, Usage: usage(1)}), store.ErrNotFound)
	answer(s.ApplySpooled(ctx, "removed", []store.Settlement{{Box: "alpha", BoxCreated: old.CreatedAt, Month: m, Charge: 30, Usage: usage(1)}}, nil)).
		is(t, "ApplySpooled(a call of the removed box)", true)
	if got := tallies(t, s, "alpha", m); len(got) != 0 {
		t.Errorf("Tallies of the new box after the removed box's calls = %+v, want none", got)
	}
	answer(s.ListUsage(ctx, "alpha", m)).none(t, "ListUsage of the new box after the removed box's calls")

	id := answer(reserveOf(created, 40)).held(t, "Reserve(the new box's call)")
	must(t, "RotateToken(alpha) with no grace, mid-call", s.RotateToken(ctx, "alpha", hash("token-alpha-3")))
	answer(s.ApplySpooled(ctx, "both", []store.Settlement{
		{Box: "alpha", BoxCreated: old.CreatedAt, Month: m, Charge: 500, Usage: usage(5)},
		{Reservation: id, Box: "alpha", BoxCreated: created, Month: m, Charge: 20, Usage: usage(1)},
	}, nil)).is(t, "ApplySpooled(a call of each box)", true)
	same(t, "Tallies after a call of each box", []store.Tally{{Box: "alpha", Month: m, Spent: 20}}, tallies(t, s, "alpha", m))
	id = answer(reserveOf(created, 25)).held(t, "Reserve(the new box's call, after the rotation)")
	must(t, "Settle(the new box's call, after the rotation)", s.Settle(ctx, store.Settlement{Reservation: id, Box: "alpha", BoxCreated: created, Month: m, Charge: 10}))
	answer(s.ApplySpooled(ctx, "unnamed", []store.Settlement{{Box: "alpha", Month: m, Charge: 1}}, nil)).is(t, "ApplySpooled(naming no enrolment)", true)
	same(t, "Tallies after the new box's calls", []store.Tally{{Box: "alpha", Month: m, Spent: 31}}, tallies(t, s, "alpha", m))
	answer(reserveOf(time.Time{}, 19)).held(t, "Reserve(naming no enrolment, 19 of 19 left)")
	answer(s.ListUsage(ctx, "alpha", m)).is(t, "ListUsage of the new box", usage(1))
}
