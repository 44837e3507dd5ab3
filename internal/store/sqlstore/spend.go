package sqlstore

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// SetBudget creates or replaces the budget of b.Box and b.Principal;
// store.ErrNotFound if there is no such box.
func (s *Store) SetBudget(ctx context.Context, b store.Budget) error {
	if b.Limit < 0 {
		return fmt.Errorf("set budget of box %q: negative limit", b.Box)
	}
	return s.put(ctx, fmt.Sprintf("set budget of box %q", b.Box), []store.Change{{Kind: store.ChangeBudget, Key: b.Box}},
		`INSERT INTO budgets (box, principal, limit_micros, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (box, principal) DO UPDATE SET limit_micros = excluded.limit_micros, updated_at = excluded.updated_at`,
		b.Box, b.Principal, b.Limit, s.D.Time(b.UpdatedAt))
}

// ListBudgets returns the budgets of box, the box's own first, then by
// principal.
func (s *Store) ListBudgets(ctx context.Context, box string) ([]store.Budget, error) {
	return collect(ctx, s, fmt.Sprintf("list budgets of box %q", box), "SELECT principal, limit_micros, updated_at FROM budgets WHERE box = $1 ORDER BY principal"+s.D.Collate(),
		func(r Scanner) (store.Budget, error) {
			b := store.Budget{Box: box}
			err := r.Scan(&b.Principal, &b.Limit, Time(&b.UpdatedAt))
			return b, err
		}, box)
}

// DeleteBudget removes the budget of box and principal; store.ErrNotFound
// if none.
func (s *Store) DeleteBudget(ctx context.Context, box, principal string) error {
	return s.touch(ctx, fmt.Sprintf("delete budget of box %q", box), []store.Change{{Kind: store.ChangeBudget, Key: box}},
		"DELETE FROM budgets WHERE box = $1 AND principal = $2", box, principal)
}

// Tallies returns the tallies of box for month, the box's own first.
func (s *Store) Tallies(ctx context.Context, box, month string) ([]store.Tally, error) {
	return collect(ctx, s, fmt.Sprintf("tallies of box %q", box), "SELECT "+tallyColumns+" FROM tallies WHERE box = $1 AND month = $2 ORDER BY principal"+s.D.Collate(),
		scanTally, box, month)
}

// tallyColumns are a tally's columns, as scanTally reads them.
const tallyColumns = "box, principal, month, spent, reserved"

func scanTally(r Scanner) (store.Tally, error) {
	var t store.Tally
	err := r.Scan(&t.Box, &t.Principal, &t.Month, &t.Spent, &t.Reserved)
	return t, err
}

// ListUsage returns the usage of box in month, by payer kind, principal
// and model.
func (s *Store) ListUsage(ctx context.Context, box, month string) ([]store.Usage, error) {
	c := s.D.Collate()
	return collect(ctx, s, fmt.Sprintf("usage of box %q", box), "SELECT "+usageColumns+" FROM usage WHERE box = $1 AND month = $2 ORDER BY payer_kind"+c+", principal"+c+", model"+c,
		scanUsage, box, month)
}

// usageColumns are a usage row's columns, as scanUsage reads them.
const usageColumns = `box, month, payer_kind, principal, model, calls, unpriced, unmeasured,
	input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost`

func scanUsage(r Scanner) (store.Usage, error) {
	var u store.Usage
	err := r.Scan(&u.Box, &u.Month, &u.PayerKind, &u.Principal, &u.Model, &u.Calls, &u.Unpriced, &u.Unmeasured,
		&u.InputTokens, &u.OutputTokens, &u.CacheWriteTokens, &u.CacheReadTokens, &u.Cost)
	return u, err
}
