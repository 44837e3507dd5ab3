package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/spendsql"
)

// SpendTx is a transaction, or for spendsql.Budgeted a database, as
// spendsql runs the budget algorithm in it.
type SpendTx struct {
	// Q runs the statements.
	Q Querier
	// Tx, when set, is Q, and runs the statements in Stmts prepared.
	Tx    *sql.Tx
	Stmts map[string]*sql.Stmt
	D     Dialect
}

// SpendTx is tx as spendsql uses it, running the statements Stmts holds
// prepared (SQLite parses a statement anew on each run otherwise; an
// upsert costs more to parse than to run).
func (s *Store) SpendTx(tx *sql.Tx) SpendTx {
	return SpendTx{Q: tx, Tx: tx, Stmts: s.Stmts, D: s.D}
}

// Exec runs query and returns how many rows it changed.
func (t SpendTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := t.Stmts[query]; st != nil && t.Tx != nil {
		res, err = t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		res, err = t.Q.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QueryRow runs query; its row's Scan reports no row as
// store.ErrNotFound.
func (t SpendTx) QueryRow(ctx context.Context, query string, args ...any) spendsql.Row {
	if st := t.Stmts[query]; st != nil && t.Tx != nil {
		return spendRow{t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)}
	}
	return spendRow{t.Q.QueryRowContext(ctx, query, args...)}
}

// Each runs query and calls row with each row of its answer.
func (t SpendTx) Each(ctx context.Context, query string, args []any, row func(spendsql.Row) error) error {
	rows, err := t.Q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return spendsql.EachRow(rows, row)
}

// Time is t as the database stores a time.
func (t SpendTx) Time(tm time.Time) any { return t.D.Time(tm) }

// spendRow is a row whose Scan reports no row as store.ErrNotFound.
type spendRow struct{ r *sql.Row }

func (r spendRow) Scan(dest ...any) error {
	if err := r.r.Scan(dest...); !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return store.ErrNotFound
}

// Budgeted reports whether any budget applies to a call of box paid by
// principal, read without a write transaction: most boxes have none.
func (s *Store) Budgeted(ctx context.Context, op, box, principal string) (bool, error) {
	ok, err := spendsql.Budgeted(ctx, SpendTx{Q: s.R, D: s.D}, box, principal)
	return ok, s.D.Translate(op, err)
}

// ReleaseStale releases every reservation made before before, each in its
// own transaction so that no two tallies are locked out of order.
func (s *Store) ReleaseStale(ctx context.Context, before time.Time) (int, error) {
	const op = "release stale reservations"
	ids, err := collect(ctx, s, s.R, op, "SELECT id FROM reservations WHERE at < $1 ORDER BY id", func(r Scanner) (int64, error) {
		var id int64
		err := r.Scan(&id)
		return id, err
	}, s.D.Time(before))
	if err != nil {
		return 0, err
	}
	for i, id := range ids {
		if err := s.Write(ctx, fmt.Sprintf("%s: reservation %d", op, id), func(tx *sql.Tx) ([]store.Change, error) {
			return nil, spendsql.Release(ctx, s.SpendTx(tx), id)
		}); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}
