package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/spendsql"
)

// spendTx is a connection, or a transaction, as spendsql uses it.
type spendTx struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
	// tx, when set, is q, and runs the statements in stmts prepared.
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

// spendTx is tx as spendsql uses it, running spendsql's statements as
// prepared on the writer's connection when Open did (SQLite parses a
// statement anew on each run otherwise; an upsert costs more to parse
// than to run).
func (s *Store) spendTx(tx *sql.Tx) spendTx {
	return spendTx{q: tx, tx: tx, stmts: s.spend}
}

func (t spendTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := t.stmts[query]; st != nil {
		res, err = t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		res, err = t.q.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t spendTx) QueryRow(ctx context.Context, query string, args ...any) spendsql.Row {
	if st := t.stmts[query]; st != nil {
		return spendRow{t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)}
	}
	return spendRow{t.q.QueryRowContext(ctx, query, args...)}
}

func (spendTx) Time(t time.Time) any { return micros(t) }

// spendRow is a row whose Scan reports no row as store.ErrNotFound.
type spendRow struct{ r *sql.Row }

func (r spendRow) Scan(dest ...any) error {
	if err := r.r.Scan(dest...); !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return store.ErrNotFound
}

// Reserve holds r.Amount against the budgets that apply to r, in one
// transaction; see store.Spend and spendsql.Reserve.
func (s *Store) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	op := fmt.Sprintf("reserve for box %q", r.Box)
	// Most boxes have no budget: find that out without taking the writer.
	ok, err := spendsql.Budgeted(ctx, spendTx{q: s.r}, r.Box, r.Principal)
	if err != nil || !ok {
		return 0, translate(op, err)
	}
	// Concurrent reservations are made in one transaction (grouped); one
	// made for a caller that has gone by the time it is committed is
	// released again.
	var id int64
	err = s.grouped(ctx, op, func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		var err error
		id, err = spendsql.Reserve(ctx, s.spendTx(tx), r)
		return nil, err
	}, func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		return nil, spendsql.Release(ctx, s.spendTx(tx), id)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// Settle releases s's reservation, charges s.Charge to its tallies and
// adds its usage, in one transaction (shared with concurrent reservations
// and settlements: see grouped); store.ErrNotFound if the box is gone.
func (s *Store) Settle(ctx context.Context, st store.Settlement) error {
	return s.grouped(ctx, fmt.Sprintf("settle for box %q", st.Box), func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		return nil, spendsql.Settle(ctx, s.spendTx(tx), st)
	}, nil)
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
			if err := spendsql.Release(ctx, s.spendTx(tx), id); err != nil {
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
