package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// SetWindowBudget creates or replaces the budget of b.Box, b.Principal
// and b.Window; store.ErrNotFound if there is no such box.
func (s *Store) SetWindowBudget(ctx context.Context, b store.Budget) error {
	op := fmt.Sprintf("set %s budget of box %q", b.Window, b.Box)
	if _, err := store.ParseWindow(b.Window); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if b.Limit < 0 {
		return fmt.Errorf("%s: negative limit", op)
	}
	return s.Write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO window_budgets (box, principal, win, limit_micros, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (box, principal, win) DO UPDATE SET limit_micros = excluded.limit_micros, updated_at = excluded.updated_at`,
			b.Box, b.Principal, b.Window, b.Limit, s.D.Time(b.UpdatedAt))
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBudget, Key: b.Box}}, nil
	})
}

// ListWindowBudgets returns the window budgets of box, the box's own
// first, then by principal and window.
func (s *Store) ListWindowBudgets(ctx context.Context, box string) ([]store.Budget, error) {
	return collect(ctx, s, s.R, fmt.Sprintf("list window budgets of box %q", box), "SELECT principal, win, limit_micros, updated_at FROM window_budgets WHERE box = $1 ORDER BY principal"+s.D.Collate()+", win"+s.D.Collate(),
		func(r Scanner) (store.Budget, error) {
			b := store.Budget{Box: box}
			err := r.Scan(&b.Principal, &b.Window, &b.Limit, Time(&b.UpdatedAt))
			return b, err
		}, box)
}

// DeleteWindowBudget removes a window budget; store.ErrNotFound if none.
func (s *Store) DeleteWindowBudget(ctx context.Context, box, principal, window string) error {
	return s.Write(ctx, fmt.Sprintf("delete %s budget of box %q", window, box), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "DELETE FROM window_budgets WHERE box = $1 AND principal = $2 AND win = $3", box, principal, window)
		if err != nil {
			return nil, err
		}
		if err := NotFound(res); err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBudget, Key: box}}, nil
	})
}

// WindowTallies returns what each of box's window budgets counts at at.
func (s *Store) WindowTallies(ctx context.Context, box string, at time.Time) ([]store.WindowTally, error) {
	out, err := windowTallies(ctx, dbTx{q: s.R, s: s}, box, at)
	if err != nil {
		return nil, s.D.Translate(fmt.Sprintf("window tallies of box %q", box), err)
	}
	return out, nil
}
