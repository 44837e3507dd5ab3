package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/spendsql"
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

// spendTx is the pool, or a transaction, as spendsql uses it.
type spendTx struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
}

func (t spendTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.q.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (t spendTx) QueryRow(ctx context.Context, query string, args ...any) spendsql.Row {
	return spendRow{t.q.QueryRow(ctx, query, args...)}
}

func (spendTx) Time(t time.Time) any { return t }

// Each runs query and calls row with each row of its answer.
func (t spendTx) Each(ctx context.Context, query string, args []any, row func(spendsql.Row) error) error {
	rows, err := t.q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ExecAll sends stmts in one batch; see spendsql.Batcher.
func (t spendTx) ExecAll(ctx context.Context, stmts []spendsql.Stmt) error {
	tx, ok := t.q.(pgx.Tx)
	if !ok || len(stmts) < 2 {
		for _, st := range stmts {
			if _, err := t.q.Exec(ctx, st.Query, st.Args...); err != nil {
				return err
			}
		}
		return nil
	}
	var b pgx.Batch
	for _, st := range stmts {
		b.Queue(st.Query, st.Args...)
	}
	return tx.SendBatch(ctx, &b).Close()
}

// spendRow is a row whose Scan reports no row as store.ErrNotFound.
type spendRow struct{ r pgx.Row }

func (r spendRow) Scan(dest ...any) error {
	if err := r.r.Scan(dest...); !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return store.ErrNotFound
}

// Reserve holds r.Amount against the budgets that apply to r, in one
// transaction; see store.Spend and spendsql.Reserve.
func (s *Store) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	op := fmt.Sprintf("reserve for box %q", r.Box)
	if ok, err := spendsql.Budgeted(ctx, spendTx{s.pool}, r.Box, r.Principal); err != nil || !ok {
		return 0, translate(op, err)
	}
	var id int64
	err := s.write(ctx, op, func(tx pgx.Tx) ([]store.Change, error) {
		var err error
		id, err = spendsql.Reserve(ctx, spendTx{tx}, r)
		return nil, err
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// Settle releases st's reservation, charges st.Charge to its tallies and
// adds its usage, in one transaction; store.ErrNotFound if the box is gone.
func (s *Store) Settle(ctx context.Context, st store.Settlement) error {
	return s.write(ctx, fmt.Sprintf("settle for box %q", st.Box), func(tx pgx.Tx) ([]store.Change, error) {
		return nil, spendsql.Settle(ctx, spendTx{tx}, st)
	})
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
			return nil, spendsql.Release(ctx, spendTx{tx}, id)
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
