package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// day is 2026-10-DD at noon UTC.
func day(d int) time.Time { return time.Date(2026, 10, d, 12, 0, 0, 0, time.UTC) }

func testWindowBudgets(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	if err := s.SetWindowBudget(ctx, store.Budget{Box: "alpha", Window: "month", Limit: 1, UpdatedAt: at(1)}); err == nil {
		t.Errorf("SetWindowBudget(month) = nil, want an error (monthly budgets are Spend's)")
	}
	wantErr(t, "SetWindowBudget(nobox)", s.SetWindowBudget(ctx, store.Budget{Box: "nobox", Window: "day", Limit: 1, UpdatedAt: at(1)}), store.ErrNotFound)
	del := func(ctx context.Context, b store.Budget) error {
		return s.DeleteWindowBudget(ctx, b.Box, b.Principal, b.Window)
	}
	c := concept[store.Budget]{set: "SetWindowBudget", del: "DeleteWindowBudget", write: s.SetWindowBudget, remove: del,
		key: func(b store.Budget) string { return b.Box + ", " + b.Principal + ", " + b.Window }}
	week := store.Budget{Box: "alpha", Window: "week", Limit: 50, UpdatedAt: at(1)}
	c.sets(t, week, store.Budget{Box: "alpha", Window: "day", Limit: 5, UpdatedAt: at(1)},
		store.Budget{Box: "alpha", Principal: "github:ann", Window: "7d", Limit: 20, UpdatedAt: at(1)})
	c.replaces(t, store.Budget{Box: "alpha", Window: "day", Limit: 6, UpdatedAt: at(2)})
	answer(s.ListWindowBudgets(ctx, "alpha")).is(t, "ListWindowBudgets", []store.Budget{
		{Box: "alpha", Window: "day", Limit: 6, UpdatedAt: at(2).UTC().Truncate(time.Microsecond)},
		{Box: "alpha", Window: "week", Limit: 50, UpdatedAt: at(1).UTC().Truncate(time.Microsecond)},
		{Box: "alpha", Principal: "github:ann", Window: "7d", Limit: 20, UpdatedAt: at(1).UTC().Truncate(time.Microsecond)},
	})
	c.removes(t, week)
	if got, _ := s.ListWindowBudgets(ctx, "alpha"); len(got) != 2 {
		t.Errorf("ListWindowBudgets after delete = %+v, want 2", got)
	}
}

// testWindowReserveAndSettle: a call is held to every window budget that
// applies, its settlement charges the window's bucket, and a rolling
// window lets go of a day once it is past.
func testWindowReserveAndSettle(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	wantErr(t, "SetWindowBudget(day)", s.SetWindowBudget(ctx, store.Budget{Box: "alpha", Window: "day", Limit: 100, UpdatedAt: at(1)}), nil)
	wantErr(t, "SetWindowBudget(3d)", s.SetWindowBudget(ctx, store.Budget{Box: "alpha", Principal: "github:ann", Window: "3d", Limit: 150, UpdatedAt: at(1)}), nil)
	id := answer(s.Reserve(ctx, store.Reservation{Box: "alpha", Principal: "github:ann", Month: "2026-10", Amount: 80, At: day(5)})).held(t, "Reserve(80)")
	_, err := s.Reserve(ctx, store.Reservation{Box: "alpha", Month: "2026-10", Amount: 30, At: day(5)})
	var over *store.OverBudgetError
	if !errors.As(err, &over) || over.Budget.Window != "day" || over.Month != "2026-10-05" || over.Reserved != 80 {
		t.Fatalf("Reserve(30) past the day's 100 = %v, want an OverBudgetError of the day 2026-10-05 with 80 reserved", err)
	}
	wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Reservation: id, Box: "alpha", Principal: "github:ann", Month: "2026-10", Charge: 60, At: day(5)}), nil)
	ts := answer(s.WindowTallies(ctx, "alpha", day(5))).must(t, "WindowTallies")
	if len(ts) != 2 || ts[0].Spent != 60 || ts[0].Reserved != 0 || ts[1].Spent != 60 || ts[1].From != "2026-10-03" {
		t.Errorf("WindowTallies after Settle = %+v, want 60 spent in each, nothing held, ann's from 2026-10-03", ts)
	}
	// The next day the daily budget is fresh, the rolling one is not.
	if _, err := s.Reserve(ctx, store.Reservation{Box: "alpha", Principal: "github:ann", Month: "2026-10", Amount: 95, At: day(6)}); !errors.As(err, &over) || over.Budget.Window != "3d" {
		t.Fatalf("Reserve(95) on day 6 = %v, want refused by ann's 3d budget (60 of 150 spent)", err)
	}
	if _, err := s.Reserve(ctx, store.Reservation{Box: "alpha", Principal: "github:ann", Month: "2026-10", Amount: 90, At: day(6)}); err != nil {
		t.Fatalf("Reserve(90) on day 6 = %v, want held", err)
	}
	// Three days on, day 5 has left the rolling window.
	if _, err := s.Reserve(ctx, store.Reservation{Box: "alpha", Principal: "github:ann", Month: "2026-10", Amount: 55, At: day(8)}); err != nil {
		t.Fatalf("Reserve(55) on day 8 = %v, want held (day 5's 60 is out of the window)", err)
	}
	// A released reservation lets go of its window holds.
	if n, err := releaseBefore(ctx, s, day(30)); n != 2 || err != nil {
		t.Fatalf("releaseBefore(day 30) = %d, %v, want 2, nil", n, err)
	}
	ts, _ = s.WindowTallies(ctx, "alpha", day(8))
	for _, tl := range ts {
		if tl.Reserved != 0 {
			t.Errorf("WindowTallies after releaseBefore = %+v, want nothing held", ts)
		}
	}
}

// testConcurrentWindowReserve is the window budget's guarantee: however
// many reserve at once, what is held never passes the limit, even beside
// a monthly budget and a second window.
func testConcurrentWindowReserve(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const n, amount, limit = 50, 10, 105
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1 << 40, UpdatedAt: at(1)}), nil)
	wantErr(t, "SetWindowBudget(day)", s.SetWindowBudget(ctx, store.Budget{Box: "alpha", Window: "day", Limit: limit, UpdatedAt: at(1)}), nil)
	wantErr(t, "SetWindowBudget(7d)", s.SetWindowBudget(ctx, store.Budget{Box: "alpha", Window: "7d", Limit: 1 << 30, UpdatedAt: at(1)}), nil)
	ids, refused := reserveAtOnce(t, s, n, func(i int) store.Reservation {
		return store.Reservation{Box: "alpha", Month: "2026-10", Amount: amount, At: day(5)}
	})
	if len(ids) != limit/amount || refused != n-limit/amount {
		t.Errorf("%d concurrent Reserve(%d) against a day's %d: %d held, %d refused, want %d, %d", n, amount, limit, len(ids), refused, limit/amount, n-limit/amount)
	}
	ts, err := s.WindowTallies(ctx, "alpha", day(5))
	if err != nil || len(ts) != 2 || ts[0].Reserved != int64(len(ids))*amount || ts[0].Reserved > limit {
		t.Errorf("WindowTallies = %+v, %v, want the day's reserved %d, at most %d", ts, err, int64(len(ids))*amount, limit)
	}
}
