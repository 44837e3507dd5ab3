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

// RateLimits.

func (s *Store) SetRateLimit(ctx context.Context, l store.RateLimit) error {
	return do0(s, ctx, "set rate limit", func(ctx context.Context) error { return s.st.SetRateLimit(ctx, l) })
}

func (s *Store) ListRateLimits(ctx context.Context, box string) ([]store.RateLimit, error) {
	return do(s, ctx, "list rate limits", func(ctx context.Context) ([]store.RateLimit, error) { return s.st.ListRateLimits(ctx, box) })
}

func (s *Store) DeleteRateLimit(ctx context.Context, box, principal string) error {
	return do0(s, ctx, "delete rate limit", func(ctx context.Context) error { return s.st.DeleteRateLimit(ctx, box, principal) })
}

func (s *Store) ExchangeRates(ctx context.Context, replica string, mine []store.RateCount, since time.Time) ([]store.RateCount, error) {
	return do(s, ctx, "exchange rate counts", func(ctx context.Context) ([]store.RateCount, error) {
		return s.st.ExchangeRates(ctx, replica, mine, since)
	})
}

// Alerts.

func (s *Store) MarkAlert(ctx context.Context, a store.BudgetAlert) (bool, error) {
	return do(s, ctx, "record budget alert", func(ctx context.Context) (bool, error) { return s.st.MarkAlert(ctx, a) })
}

func (s *Store) ListAlerts(ctx context.Context, box string, limit int) ([]store.BudgetAlert, error) {
	return do(s, ctx, "list budget alerts", func(ctx context.Context) ([]store.BudgetAlert, error) { return s.st.ListAlerts(ctx, box, limit) })
}
