package cache_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// TestBudgeted_SeesABudgetSetElsewhere: whether a box has a budget comes
// from memory, and a budget another process sets or removes is seen at
// the next poll of the change log.
func TestBudgeted_SeesABudgetSetElsewhere(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	st, c := saladCache(t, now)
	budgeted := func(want bool, when string) {
		t.Helper()
		if got, err := c.Budgeted(ctx, "salad", now); got != want || err != nil {
			t.Errorf("Budgeted(salad) %s = %v, %v, want %v, nil", when, got, err, want)
		}
	}
	budgeted(false, "with no budget")
	// Set behind the cache's back, as `boxbroker budget set` does from its own process.
	if err := st.SetBudget(ctx, store.Budget{Box: "salad", Principal: "github:ann", Limit: 1, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	budgeted(false, "before the poll (from memory)")
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	budgeted(true, "after a principal's budget was set")
	if err := st.DeleteBudget(ctx, "salad", "github:ann"); err != nil {
		t.Fatal(err)
	}
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	budgeted(false, "after it was removed")
}

// TestBudgeted_KeptByTheBoxAsEnrolled: a box with no budget is removed
// and another added under its name with one, behind the cache's back:
// before the next poll, memory still says the removed box has none, and
// asks the store about the new box rather than take it for the removed
// one.
func TestBudgeted_KeptByTheBoxAsEnrolled(t *testing.T) {
	ctx := context.Background()
	old := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	st, c := saladCache(t, old)
	if got, err := c.Budgeted(ctx, "salad", old); got || err != nil {
		t.Fatalf("Budgeted(salad) = %v, %v, want false, nil", got, err)
	}
	// Removed and added anew with a budget, as another process does.
	created := old.Add(time.Second)
	if err := st.DeleteBox(ctx, "salad"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBox(ctx, store.Box{Name: "salad", TokenHash: "h2", CreatedAt: created, PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetBudget(ctx, store.Budget{Box: "salad", Limit: 1, UpdatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Budgeted(ctx, "salad", created); !got || err != nil {
		t.Errorf("Budgeted(the new salad) before the poll = %v, %v, want true, nil", got, err)
	}
}

// saladCache returns a store holding the box salad, enrolled at now, and
// a cache over it whose clock stands at now, polled once.
func saladCache(t *testing.T, now time.Time) (*sqlite.Store, *cache.Cache) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateBox(context.Background(), store.Box{Name: "salad", TokenHash: "h", CreatedAt: now, PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	c := cache.New(st, cache.Options{Now: func() time.Time { return now }})
	if err := c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st, c
}
