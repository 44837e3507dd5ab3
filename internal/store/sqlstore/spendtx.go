package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// SpendTx is a backend's write transaction (or, for the reads of
// Budgeted and WindowTallies, its readers) as the budget algorithm
// (reserve.go) runs in it.
type SpendTx interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query whose first row the result's Scan reads;
	// Scan returns store.ErrNotFound when there is no row, and the
	// driver's other errors as they are.
	QueryRow(ctx context.Context, query string, args ...any) Scanner
	// Each runs a query and calls row with each row of its answer, in
	// order, stopping at row's first error, which it returns.
	Each(ctx context.Context, query string, args []any, row func(Scanner) error) error
	// ExecAll runs stmts, whose answers are not read, in order, stopping
	// at the first error: PostgreSQL sends them in one exchange (pgx's
	// Batch), SQLite one after the other.
	ExecAll(ctx context.Context, stmts []Stmt) error
	// AddAudit writes audit entries in the transaction.
	AddAudit(ctx context.Context, entries []store.AuditEntry) error
	// Time is t in the form the database keeps a time in.
	Time(t time.Time) any
	// Now is the dialect's Now: the expression that reads the
	// database's clock less ago.
	Now(ago time.Duration) string
	// ForKeyShare is the dialect's ForKeyShare.
	ForKeyShare() string
}

// Stmt is a statement and its arguments.
type Stmt struct {
	Query string
	Args  []any
}

// Rows is a query's answer as a SpendTx's Each reads it: *sql.Rows and
// pgx.Rows are both one.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// EachRow calls row with each of rows, in order, stopping at row's first
// error, which it returns, else rows' own; the caller closes rows. A
// SpendTx's Each is its query and EachRow.
func EachRow(rows Rows, row func(Scanner) error) error {
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// dbTx is a database/sql transaction, or a database, as a SpendTx.
type dbTx struct {
	// q runs the statements.
	q Querier
	// tx, when set, is q, and runs the statements in stmts prepared.
	tx *sql.Tx
	s  *Store
}

// SpendTx is tx as the budget algorithm runs in it, running the
// statements Stmts holds prepared (SQLite parses a statement anew on
// each run otherwise; an upsert costs more to parse than to run) and
// writing audit entries with Audit.
func (s *Store) SpendTx(tx *sql.Tx) SpendTx {
	return dbTx{q: tx, tx: tx, s: s}
}

// stmt is query prepared, in t's transaction, or nil.
func (t dbTx) stmt(ctx context.Context, query string) *sql.Stmt {
	if st := t.s.Stmts[query]; st != nil && t.tx != nil {
		return t.tx.StmtContext(ctx, st)
	}
	return nil
}

func (t dbTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := t.stmt(ctx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = t.q.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t dbTx) QueryRow(ctx context.Context, query string, args ...any) Scanner {
	if st := t.stmt(ctx, query); st != nil {
		return NoRow[*sql.Row]{st.QueryRowContext(ctx, args...)}
	}
	return NoRow[*sql.Row]{t.q.QueryRowContext(ctx, query, args...)}
}

func (t dbTx) Each(ctx context.Context, query string, args []any, row func(Scanner) error) error {
	rows, err := t.q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return EachRow(rows, row)
}

func (t dbTx) ExecAll(ctx context.Context, stmts []Stmt) error {
	for _, st := range stmts {
		if _, err := t.Exec(ctx, st.Query, st.Args...); err != nil {
			return err
		}
	}
	return nil
}

func (t dbTx) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	return t.s.Audit.In(ctx, t.tx, entries)
}

func (t dbTx) Time(tm time.Time) any { return t.s.D.Time(tm) }

func (t dbTx) Now(ago time.Duration) string { return t.s.D.Now(ago) }

func (t dbTx) ForKeyShare() string { return t.s.D.ForKeyShare() }

// NoRow is a row whose Scan reports no row (sql.ErrNoRows, which pgx's
// ErrNoRows is too) as store.ErrNotFound, as SpendTx's QueryRow answers.
type NoRow[R Scanner] struct{ Row R }

func (r NoRow[R]) Scan(dest ...any) error {
	if err := r.Row.Scan(dest...); !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return store.ErrNotFound
}

// Budgeted reports whether any budget applies to a call of box paid by
// principal, read without a write transaction: most boxes have none.
func (s *Store) Budgeted(ctx context.Context, op, box, principal string) (bool, error) {
	ok, err := budgeted(ctx, dbTx{q: s.R, s: s}, box, principal)
	return ok, s.D.Translate(op, err)
}

// Reserve holds r.Amount against the budgets that apply to r, in one
// transaction (Dialect.Spend: in SQLite, shared with concurrent
// reservations and settlements, and released again if its caller has
// gone by the time it commits); see store.Spend.
func (s *Store) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	op := fmt.Sprintf("reserve for box %q", r.Box)
	// Most boxes have no budget: find that out without taking the writer.
	if ok, err := s.Budgeted(ctx, op, r.Box, r.Principal); err != nil || !ok {
		return 0, err
	}
	if r.At.IsZero() && r.WindowAt.IsZero() {
		r.WindowAt = s.now() // the replica's, as a settlement's window buckets
	}
	var id int64
	err := s.D.Spend(ctx, op, func(ctx context.Context, tx SpendTx) error {
		var err error
		id, err = ReserveIn(ctx, tx, r)
		return err
	}, func(ctx context.Context, tx SpendTx) error {
		return ReleaseIn(ctx, tx, id)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// Settle releases st's reservation, charges st.Charge to its tallies and
// adds its usage, in one transaction (Dialect.Spend); store.ErrNotFound
// if the box is gone, or is another than st.BoxCreated names (nothing
// is applied then: st's reservation went with the box it was held
// against).
func (s *Store) Settle(ctx context.Context, st store.Settlement) error {
	return s.D.Spend(ctx, fmt.Sprintf("settle for box %q", st.Box), func(ctx context.Context, tx SpendTx) error {
		if !st.BoxCreated.IsZero() {
			if ok, err := present(ctx, tx, enrolmentOf(st)); err != nil || !ok {
				return cmp.Or(err, store.ErrNotFound)
			}
		}
		batch := []store.Settlement{st}
		dbHour, err := databaseHour(ctx, tx, batch, s.D.NowMilli())
		if err != nil {
			return err
		}
		return settle(ctx, tx, batch, s.now(), dbHour)
	}, nil)
}

// ApplySpooled writes one spooled batch under key, once, in one
// transaction (Dialect.Spend); see store.Spooled.
func (s *Store) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	op := fmt.Sprintf("apply spooled batch %q", key)
	if s.Audit != nil && len(audit) > 0 {
		if err := s.Audit.Ready(ctx, len(audit)); err != nil {
			return false, s.D.Translate(op, err)
		}
	}
	applied := false
	err := s.D.Spend(ctx, op, func(ctx context.Context, tx SpendTx) error {
		// The key's row answers with the database's clock as it is
		// stamped, which bounds the batch's prompt-cache hours (settle):
		// no statement more to read it. No row: applied before.
		var ms int64
		err := tx.QueryRow(ctx, "INSERT INTO spooled (key, at) VALUES ($1, "+s.D.Now(0)+") ON CONFLICT DO NOTHING RETURNING "+s.D.NowMilli(), key).Scan(&ms)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		// A settlement of a box removed since, or of another box of
		// its name than the one it names, is skipped.
		if err := settleMany(ctx, tx, settle, s.now(), hourOfMilli(ms)); err != nil {
			return err
		}
		if len(audit) > 0 {
			if err := tx.AddAudit(ctx, audit); err != nil {
				return err
			}
		}
		// Keys older than any spool still replayed are forgotten. The
		// database's clock stamps and judges them: a replica whose own
		// clock jumps ahead would forget every key, and apply a batch
		// replayed then twice.
		if _, err := tx.Exec(ctx, "DELETE FROM spooled WHERE at < "+s.D.Now(store.SpooledKeep)); err != nil {
			return err
		}
		applied = true
		return nil
	}, nil)
	if err != nil {
		// applied is not read: SQLite's group may still be writing it.
		return false, err
	}
	return applied, nil
}

// ReleaseExpired releases every reservation stamped (or last renewed)
// more than lease ago by the database's clock, each in its own
// transaction so that no two tallies are locked out of order; one renewed
// between the query and its release is kept.
func (s *Store) ReleaseExpired(ctx context.Context, lease time.Duration) (int, error) {
	const op = "release expired reservations"
	expired := "at < " + s.D.Now(lease)
	ids, err := collect(ctx, s, op, "SELECT id FROM reservations WHERE "+expired+" ORDER BY id", value[int64])
	if err != nil {
		return 0, err
	}
	del := strings.Replace(releaseDelete, "WHERE id = $1", "WHERE id = $1 AND "+expired, 1)
	n := 0
	for _, id := range ids {
		var released bool
		err := s.Write(ctx, fmt.Sprintf("%s: reservation %d", op, id), func(tx *sql.Tx) ([]store.Change, error) {
			var err error
			released, err = releaseBy(ctx, s.SpendTx(tx), del, id)
			return nil, err
		})
		if err != nil {
			return n, err
		}
		if released {
			n++
		}
	}
	return n, nil
}
