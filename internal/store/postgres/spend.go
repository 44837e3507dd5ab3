package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// SetBudget creates or replaces the budget of b.Box and b.Principal;
// store.ErrNotFound if there is no such box.
func (s *Store) SetBudget(ctx context.Context, b store.Budget) error {
	if b.Limit < 0 {
		return fmt.Errorf("set budget of box %q: negative limit", b.Box)
	}
	return s.write(ctx, fmt.Sprintf("set budget of box %q", b.Box), func(tx pgx.Tx) ([]store.Change, error) {
		_, err := tx.Exec(ctx, `INSERT INTO budgets (box, principal, limit_micros, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (box, principal) DO UPDATE SET limit_micros = excluded.limit_micros, updated_at = excluded.updated_at`,
			b.Box, b.Principal, b.Limit, b.UpdatedAt)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBudget, Key: b.Box}}, nil
	})
}

// ListBudgets returns the budgets of box, the box's own first, then by
// principal.
func (s *Store) ListBudgets(ctx context.Context, box string) ([]store.Budget, error) {
	op := fmt.Sprintf("list budgets of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT principal, limit_micros, updated_at FROM budgets WHERE box = $1 ORDER BY principal COLLATE "C"`, box)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Budget, error) {
		b := store.Budget{Box: box}
		err := r.Scan(&b.Principal, &b.Limit, &b.UpdatedAt)
		b.UpdatedAt = b.UpdatedAt.UTC()
		return b, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// DeleteBudget removes the budget of box and principal; store.ErrNotFound
// if none.
func (s *Store) DeleteBudget(ctx context.Context, box, principal string) error {
	return s.write(ctx, fmt.Sprintf("delete budget of box %q", box), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, "DELETE FROM budgets WHERE box = $1 AND principal = $2", box, principal)
		if err != nil {
			return nil, err
		}
		if err := notFound(tag); err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBudget, Key: box}}, nil
	})
}

// principals are the tallies a call of principal is charged to: the box's
// own, then the principal's. Rows are always locked in this order.
func principals(principal string) []string {
	if principal == "" {
		return []string{""}
	}
	return []string{"", principal}
}

// Reserve holds r.Amount against the budgets that apply to r, each by one
// conditional UPDATE, in one transaction; see store.Spend. A concurrent
// Reserve on the same tally waits for this one's row lock and then
// evaluates its condition against the committed row.
func (s *Store) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	op := fmt.Sprintf("reserve for box %q", r.Box)
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM budgets WHERE box = $1 AND principal IN ('', $2)", r.Box, r.Principal).Scan(&n); err != nil {
		return 0, translate(op, err)
	}
	if n == 0 {
		return 0, nil
	}
	var id int64
	err := s.write(ctx, op, func(tx pgx.Tx) ([]store.Change, error) {
		limits := map[string]int64{}
		rows, err := tx.Query(ctx, "SELECT principal, limit_micros FROM budgets WHERE box = $1 AND principal IN ('', $2)", r.Box, r.Principal)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var p string
			var limit int64
			if err := rows.Scan(&p, &limit); err != nil {
				rows.Close()
				return nil, err
			}
			limits[p] = limit
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(limits) == 0 {
			return nil, nil // removed meanwhile
		}
		for _, p := range principals(r.Principal) {
			if _, err := tx.Exec(ctx, "INSERT INTO tallies (box, principal, month) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", r.Box, p, r.Month); err != nil {
				return nil, err
			}
			limit, budgeted := limits[p]
			if !budgeted {
				if _, err := tx.Exec(ctx, "UPDATE tallies SET reserved = reserved + $1 WHERE box = $2 AND principal = $3 AND month = $4",
					r.Amount, r.Box, p, r.Month); err != nil {
					return nil, err
				}
				continue
			}
			tag, err := tx.Exec(ctx, `UPDATE tallies SET reserved = reserved + $1
				WHERE box = $2 AND principal = $3 AND month = $4
				AND spent + reserved + $1 <= (SELECT limit_micros FROM budgets WHERE box = $2 AND principal = $3)`,
				r.Amount, r.Box, p, r.Month)
			if err != nil {
				return nil, err
			}
			if tag.RowsAffected() == 0 {
				e := &store.OverBudgetError{Budget: store.Budget{Box: r.Box, Principal: p, Limit: limit}, Month: r.Month}
				if err := tx.QueryRow(ctx, "SELECT spent, reserved FROM tallies WHERE box = $1 AND principal = $2 AND month = $3",
					r.Box, p, r.Month).Scan(&e.Spent, &e.Reserved); err != nil {
					return nil, err
				}
				return nil, e
			}
		}
		return nil, tx.QueryRow(ctx, "INSERT INTO reservations (box, principal, month, amount, at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
			r.Box, r.Principal, r.Month, r.Amount, r.At).Scan(&id)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// release deletes reservation id and takes its amount off the tallies it
// was held against. A reservation already gone is not an error.
func release(ctx context.Context, tx pgx.Tx, id int64) error {
	var box, principal, month string
	var amount int64
	err := tx.QueryRow(ctx, "DELETE FROM reservations WHERE id = $1 RETURNING box, principal, month, amount", id).Scan(&box, &principal, &month, &amount)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range principals(principal) {
		if _, err := tx.Exec(ctx, "UPDATE tallies SET reserved = GREATEST(reserved - $1, 0) WHERE box = $2 AND principal = $3 AND month = $4",
			amount, box, p, month); err != nil {
			return err
		}
	}
	return nil
}

// Settle releases st's reservation, charges st.Charge to its tallies and
// adds its usage, in one transaction; store.ErrNotFound if the box is gone.
func (s *Store) Settle(ctx context.Context, st store.Settlement) error {
	return s.write(ctx, fmt.Sprintf("settle for box %q", st.Box), func(tx pgx.Tx) ([]store.Change, error) {
		return nil, settleTx(ctx, tx, st)
	})
}

// settleTx applies st in tx.
func settleTx(ctx context.Context, tx pgx.Tx, st store.Settlement) error {
	if st.Reservation != 0 {
		if err := release(ctx, tx, st.Reservation); err != nil {
			return err
		}
	}
	for _, p := range principals(st.Principal) {
		if _, err := tx.Exec(ctx, `INSERT INTO tallies (box, principal, month, spent) VALUES ($1, $2, $3, $4)
			ON CONFLICT (box, principal, month) DO UPDATE SET spent = tallies.spent + excluded.spent`,
			st.Box, p, st.Month, st.Charge); err != nil {
			return err
		}
	}
	for _, u := range st.Usage {
		if _, err := tx.Exec(ctx, `INSERT INTO usage (box, month, payer_kind, principal, model, calls, unpriced, unmeasured,
				input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (box, month, payer_kind, principal, model) DO UPDATE SET
				calls = usage.calls + excluded.calls, unpriced = usage.unpriced + excluded.unpriced,
				unmeasured = usage.unmeasured + excluded.unmeasured,
				input_tokens = usage.input_tokens + excluded.input_tokens, output_tokens = usage.output_tokens + excluded.output_tokens,
				cache_write_tokens = usage.cache_write_tokens + excluded.cache_write_tokens,
				cache_read_tokens = usage.cache_read_tokens + excluded.cache_read_tokens, cost = usage.cost + excluded.cost`,
			u.Box, u.Month, u.PayerKind, u.Principal, u.Model, u.Calls, u.Unpriced, u.Unmeasured,
			u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheReadTokens, u.Cost); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseStale releases every reservation made before before, each in its
// own transaction so that no two tallies are locked out of order.
func (s *Store) ReleaseStale(ctx context.Context, before time.Time) (int, error) {
	op := "release stale reservations"
	rows, err := s.pool.Query(ctx, "SELECT id FROM reservations WHERE at < $1 ORDER BY id", before)
	if err != nil {
		return 0, translate(op, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, translate(op, err)
	}
	for i, id := range ids {
		if err := s.write(ctx, op, func(tx pgx.Tx) ([]store.Change, error) {
			return nil, release(ctx, tx, id)
		}); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}

// Tallies returns the tallies of box for month, the box's own first.
func (s *Store) Tallies(ctx context.Context, box, month string) ([]store.Tally, error) {
	op := fmt.Sprintf("tallies of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT principal, spent, reserved FROM tallies WHERE box = $1 AND month = $2 ORDER BY principal COLLATE "C"`, box, month)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Tally, error) {
		t := store.Tally{Box: box, Month: month}
		err := r.Scan(&t.Principal, &t.Spent, &t.Reserved)
		return t, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// ListUsage returns the usage of box in month, by payer kind, principal
// and model.
func (s *Store) ListUsage(ctx context.Context, box, month string) ([]store.Usage, error) {
	op := fmt.Sprintf("usage of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT payer_kind, principal, model, calls, unpriced, unmeasured,
			input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost
		FROM usage WHERE box = $1 AND month = $2 ORDER BY payer_kind COLLATE "C", principal COLLATE "C", model COLLATE "C"`, box, month)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Usage, error) {
		u := store.Usage{Box: box, Month: month}
		err := r.Scan(&u.PayerKind, &u.Principal, &u.Model, &u.Calls, &u.Unpriced, &u.Unmeasured,
			&u.InputTokens, &u.OutputTokens, &u.CacheWriteTokens, &u.CacheReadTokens, &u.Cost)
		return u, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
