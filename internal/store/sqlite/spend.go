package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// SetBudget creates or replaces the budget of b.Box and b.Principal;
// store.ErrNotFound if there is no such box.
func (s *Store) SetBudget(ctx context.Context, b store.Budget) error {
	if b.Limit < 0 {
		return fmt.Errorf("set budget of box %q: negative limit", b.Box)
	}
	return s.write(ctx, fmt.Sprintf("set budget of box %q", b.Box), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO budgets (box, principal, limit_micros, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (box, principal) DO UPDATE SET limit_micros = excluded.limit_micros, updated_at = excluded.updated_at`,
			b.Box, b.Principal, b.Limit, micros(b.UpdatedAt))
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
	rows, err := s.r.QueryContext(ctx, "SELECT principal, limit_micros, updated_at FROM budgets WHERE box = ? ORDER BY principal", box)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.Budget
	for rows.Next() {
		b := store.Budget{Box: box}
		var at int64
		if err := rows.Scan(&b.Principal, &b.Limit, &at); err != nil {
			return nil, translate(op, err)
		}
		b.UpdatedAt = fromMicros(at)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// DeleteBudget removes the budget of box and principal; store.ErrNotFound
// if none.
func (s *Store) DeleteBudget(ctx context.Context, box, principal string) error {
	return s.write(ctx, fmt.Sprintf("delete budget of box %q", box), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "DELETE FROM budgets WHERE box = ? AND principal = ?", box, principal)
		if err != nil {
			return nil, err
		}
		if err := notFound(res); err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBudget, Key: box}}, nil
	})
}

// principals are the tallies a call of principal is charged to: the box's
// own, then the principal's.
func principals(principal string) []string {
	if principal == "" {
		return []string{""}
	}
	return []string{"", principal}
}

// Reserve holds r.Amount against the budgets that apply to r, each by one
// conditional UPDATE, in one transaction; see store.Spend.
func (s *Store) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	op := fmt.Sprintf("reserve for box %q", r.Box)
	// Most boxes have no budget: find that out without taking the writer.
	var n int
	if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM budgets WHERE box = ? AND principal IN ('', ?)", r.Box, r.Principal).Scan(&n); err != nil {
		return 0, translate(op, err)
	}
	if n == 0 {
		return 0, nil
	}
	var id int64
	err := s.write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		limits := map[string]int64{}
		rows, err := tx.QueryContext(ctx, "SELECT principal, limit_micros FROM budgets WHERE box = ? AND principal IN ('', ?)", r.Box, r.Principal)
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
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if len(limits) == 0 {
			return nil, nil // removed meanwhile
		}
		for _, p := range principals(r.Principal) {
			if _, err := tx.ExecContext(ctx, "INSERT INTO tallies (box, principal, month) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", r.Box, p, r.Month); err != nil {
				return nil, err
			}
			limit, budgeted := limits[p]
			if !budgeted {
				if _, err := tx.ExecContext(ctx, "UPDATE tallies SET reserved = reserved + ? WHERE box = ? AND principal = ? AND month = ?",
					r.Amount, r.Box, p, r.Month); err != nil {
					return nil, err
				}
				continue
			}
			res, err := tx.ExecContext(ctx, `UPDATE tallies SET reserved = reserved + ?1
				WHERE box = ?2 AND principal = ?3 AND month = ?4
				AND spent + reserved + ?1 <= (SELECT limit_micros FROM budgets WHERE box = ?2 AND principal = ?3)`,
				r.Amount, r.Box, p, r.Month)
			if err != nil {
				return nil, err
			}
			if err := notFound(res); errors.Is(err, store.ErrNotFound) {
				e := &store.OverBudgetError{Budget: store.Budget{Box: r.Box, Principal: p, Limit: limit}, Month: r.Month}
				if err := tx.QueryRowContext(ctx, "SELECT spent, reserved FROM tallies WHERE box = ? AND principal = ? AND month = ?",
					r.Box, p, r.Month).Scan(&e.Spent, &e.Reserved); err != nil {
					return nil, err
				}
				return nil, e
			} else if err != nil {
				return nil, err
			}
		}
		return nil, tx.QueryRowContext(ctx, "INSERT INTO reservations (box, principal, month, amount, at) VALUES (?, ?, ?, ?, ?) RETURNING id",
			r.Box, r.Principal, r.Month, r.Amount, micros(r.At)).Scan(&id)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// release deletes reservation id and takes its amount off the tallies it
// was held against. A reservation already gone is not an error.
func release(ctx context.Context, tx *sql.Tx, id int64) error {
	var box, principal, month string
	var amount int64
	err := tx.QueryRowContext(ctx, "DELETE FROM reservations WHERE id = ? RETURNING box, principal, month, amount", id).Scan(&box, &principal, &month, &amount)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range principals(principal) {
		if _, err := tx.ExecContext(ctx, "UPDATE tallies SET reserved = max(reserved - ?, 0) WHERE box = ? AND principal = ? AND month = ?",
			amount, box, p, month); err != nil {
			return err
		}
	}
	return nil
}

// Settle releases s's reservation, charges s.Charge to its tallies and
// adds its usage, in one transaction; store.ErrNotFound if the box is gone.
func (s *Store) Settle(ctx context.Context, st store.Settlement) error {
	return s.write(ctx, fmt.Sprintf("settle for box %q", st.Box), func(tx *sql.Tx) ([]store.Change, error) {
		return nil, settleTx(ctx, tx, st)
	})
}

// settleTx applies st in tx.
func settleTx(ctx context.Context, tx *sql.Tx, st store.Settlement) error {
	if st.Reservation != 0 {
		if err := release(ctx, tx, st.Reservation); err != nil {
			return err
		}
	}
	for _, p := range principals(st.Principal) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tallies (box, principal, month, spent) VALUES (?, ?, ?, ?)
			ON CONFLICT (box, principal, month) DO UPDATE SET spent = spent + excluded.spent`,
			st.Box, p, st.Month, st.Charge); err != nil {
			return err
		}
	}
	for _, u := range st.Usage {
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage (box, month, payer_kind, principal, model, calls, unpriced, unmeasured,
				input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (box, month, payer_kind, principal, model) DO UPDATE SET
				calls = calls + excluded.calls, unpriced = unpriced + excluded.unpriced, unmeasured = unmeasured + excluded.unmeasured,
				input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
				cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
				cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, cost = cost + excluded.cost`,
			u.Box, u.Month, u.PayerKind, u.Principal, u.Model, u.Calls, u.Unpriced, u.Unmeasured,
			u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheReadTokens, u.Cost); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseStale releases every reservation made before before.
func (s *Store) ReleaseStale(ctx context.Context, before time.Time) (int, error) {
	n := 0
	err := s.write(ctx, "release stale reservations", func(tx *sql.Tx) ([]store.Change, error) {
		rows, err := tx.QueryContext(ctx, "SELECT id FROM reservations WHERE at < ? ORDER BY id", micros(before))
		if err != nil {
			return nil, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		for _, id := range ids {
			if err := release(ctx, tx, id); err != nil {
				return nil, err
			}
		}
		n = len(ids)
		return nil, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Tallies returns the tallies of box for month, the box's own first.
func (s *Store) Tallies(ctx context.Context, box, month string) ([]store.Tally, error) {
	op := fmt.Sprintf("tallies of box %q", box)
	rows, err := s.r.QueryContext(ctx, "SELECT principal, spent, reserved FROM tallies WHERE box = ? AND month = ? ORDER BY principal", box, month)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.Tally
	for rows.Next() {
		t := store.Tally{Box: box, Month: month}
		if err := rows.Scan(&t.Principal, &t.Spent, &t.Reserved); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// ListUsage returns the usage of box in month, by payer kind, principal
// and model.
func (s *Store) ListUsage(ctx context.Context, box, month string) ([]store.Usage, error) {
	op := fmt.Sprintf("usage of box %q", box)
	rows, err := s.r.QueryContext(ctx, `SELECT payer_kind, principal, model, calls, unpriced, unmeasured,
			input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost
		FROM usage WHERE box = ? AND month = ? ORDER BY payer_kind, principal, model`, box, month)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.Usage
	for rows.Next() {
		u := store.Usage{Box: box, Month: month}
		if err := rows.Scan(&u.PayerKind, &u.Principal, &u.Model, &u.Calls, &u.Unpriced, &u.Unmeasured,
			&u.InputTokens, &u.OutputTokens, &u.CacheWriteTokens, &u.CacheReadTokens, &u.Cost); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
