package deadline

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// Windows.

func (s *Store) SetWindowBudget(ctx context.Context, b store.Budget) error {
	return do0(s, ctx, "set window budget", func(ctx context.Context) error { return s.st.SetWindowBudget(ctx, b) })
}

func (s *Store) ListWindowBudgets(ctx context.Context, box string) ([]store.Budget, error) {
	return do(s, ctx, "list window budgets", func(ctx context.Context) ([]store.Budget, error) { return s.st.ListWindowBudgets(ctx, box) })
}

func (s *Store) DeleteWindowBudget(ctx context.Context, box, principal, window string) error {
	return do0(s, ctx, "delete window budget", func(ctx context.Context) error { return s.st.DeleteWindowBudget(ctx, box, principal, window) })
}

func (s *Store) WindowTallies(ctx context.Context, box string, at time.Time) ([]store.WindowTally, error) {
	return do(s, ctx, "window tallies", func(ctx context.Context) ([]store.WindowTally, error) { return s.st.WindowTallies(ctx, box, at) })
}
