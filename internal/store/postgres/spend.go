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
	return spendsql.EachRow(rows, row)
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
	if ok, err := s.Budgeted(ctx, op, r.Box, r.Principal); err != nil || !ok {
		return 0, err
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
