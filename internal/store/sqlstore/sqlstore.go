// Package sqlstore is boxbroker's store written once over database/sql:
// each stored concept is one file of SQL that both databases run, SQLite
// (modernc.org/sqlite, package sqlite) and PostgreSQL (pgx's stdlib,
// package postgres).
//
// The SQL is the dialect the two share: $N placeholders (modernc.org/sqlite
// binds $N by number, as pgx does), ON CONFLICT upserts, RETURNING, and
// IS NOT DISTINCT FROM. What truly differs is a Dialect: how a time is
// stored (UTC microseconds in SQLite, timestamptz in PostgreSQL), the
// collation that orders text by bytes, row locks, how a write appends to
// the changes log and who is told once it commits, the transaction the
// budget algorithm (reserve.go) writes in (SQLite's group commit,
// PostgreSQL's pgx batches and COPY), the query that picks a page of
// boxes, and the translation of driver errors into the store's
// sentinels. Migrations stay one directory per database, since the two
// schemas' column types differ; Migrate applies either.
//
// A new stored concept is one file here (its methods on Store) and one
// migration per database.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// Dialect is what one database does differently from the other.
type Dialect interface {
	// Time is t as the database stores a time.
	Time(t time.Time) any
	// Now is the expression that reads the database's clock less ago,
	// as the database stores a time: what replicas share (the key of a
	// spooled batch applied; the rate counts they exchange, NowMilli)
	// is stamped and judged by the one clock of the database, not by
	// each replica's own (Store.Now), which may jump. SQLite's clock is
	// its machine's; PostgreSQL's is the server's clock_timestamp().
	Now(ago time.Duration) string
	// NowMilli is the expression that reads the database's clock (as
	// Now) in Unix milliseconds, as the rate counts replicas exchange
	// are stamped.
	NowMilli() string
	// Collate is the clause, put after a text column in ORDER BY, that
	// orders it by bytes: "" in SQLite, ` COLLATE "C"` in PostgreSQL.
	Collate() string
	// ForUpdate is the clause, put at the end of a SELECT in a write,
	// that locks the rows it reads until the write commits: "" in SQLite,
	// whose writes hold the whole database.
	ForUpdate() string
	// ForKeyShare is the clause, put at the end of a SELECT in a write,
	// that keeps the rows it reads from being deleted (or their keys
	// changed) until the write commits, and no more: it waits for no
	// other write's lock but a removal's. "" in SQLite, whose writes
	// hold the whole database.
	ForKeyShare() string
	// Check reports why no write may be made now, or nil.
	Check() error
	// LogChanges appends changes, in order, to the changes log in tx, as
	// the last statements of the write.
	LogChanges(ctx context.Context, tx *sql.Tx, changes []store.Change) error
	// Committed is called once a write that logged changes commits.
	Committed()
	// Words is words as the database stores a list of scope words: a
	// JSON array's text in SQLite, a text[] in PostgreSQL; nil is stored
	// as the empty list.
	Words(words []string) any
	// WordsJSON is the expression that reads the list of words in column
	// col as a JSON array's text.
	WordsJSON(col string) string
	// Bucket is the expression that truncates the time in column col to
	// its UTC day or hour (unit is "day" or "hour"), read through Time.
	Bucket(col, unit string) string
	// LockMigrations is run first in the migrating transaction, to keep
	// other processes from migrating at once.
	LockMigrations(ctx context.Context, tx *sql.Tx) error
	// MigrationsTable is the statement that makes schema_migrations
	// (version, applied_at) if it is missing.
	MigrationsTable() string
	// BoxPage is the query that picks a page of boxes for q, which
	// q.Check accepts: the two databases search a report's listing title
	// in JSON, and sort by spend, each its own way.
	BoxPage(q store.BoxQuery) BoxPageQuery
	// Spend runs fn, a write of the budget algorithm, in one write
	// transaction of the database's own: SQLite makes it with
	// concurrent ones in one group commit, and undoes it with undo (when
	// set) in a later group if its caller has gone by the time it
	// commits; PostgreSQL runs it through pgx, sending a settlement's
	// upserts in one batch. fn writes no change. Errors are translated,
	// prefixed with op.
	Spend(ctx context.Context, op string, fn, undo func(ctx context.Context, tx SpendTx) error) error
	// Translate turns err into the store's sentinels (store.ErrNotFound,
	// ErrExists, ErrUnavailable, ErrRejected), prefixed with op; nil for
	// nil.
	Translate(op string, err error) error
}

// Store is the methods of store.Store written once. Its methods are safe
// for concurrent use.
type Store struct {
	// W runs writes and R reads; they may be the same *sql.DB.
	W, R *sql.DB
	// D is the database's dialect.
	D Dialect
	// Stmts are statements prepared on W, by text, which SpendTx runs
	// prepared; nil for none. Read-only once the store is open.
	Stmts map[string]*sql.Stmt
	// Audit writes audit entries in a write on W, for SpendTx's
	// AddAudit; set by the backend whose Spend runs in a *sql.Tx (SQLite).
	Audit Auditor
	// Now is the replica's clock, for what the store reads of this
	// replica's time (a settlement's window bucket when it carries no
	// time); nil is time.Now. Set it before the store is first used.
	// What replicas share is stamped by the database's clock instead
	// (Dialect.Now).
	Now func() time.Time
	// changes is changesSince, prepared on R.
	changes *sql.Stmt
}

// now is the replica's clock (Now) now.
func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Auditor writes audit entries in a write transaction on W.
type Auditor interface {
	// Ready readies, before a write begins, the writing of n entries in
	// it (SQLite prepares its statements on its one write connection).
	Ready(ctx context.Context, n int) error
	// In writes entries in tx.
	In(ctx context.Context, tx *sql.Tx, entries []store.AuditEntry) error
}

// New is the Store over w (writes) and r (reads) in dialect d, whose
// schema is up to date.
func New(w, r *sql.DB, d Dialect) (*Store, error) {
	s := &Store{W: w, R: r, D: d}
	var err error
	if s.changes, err = r.Prepare(changesSince); err != nil {
		return nil, d.Translate("prepare the changes log's query", err)
	}
	return s, nil
}

// Prepare prepares queries on W, for SpendTx (and the dialect's own
// writes) to run prepared.
func (s *Store) Prepare(queries ...string) error {
	if s.Stmts == nil {
		s.Stmts = make(map[string]*sql.Stmt, len(queries))
	}
	for _, q := range queries {
		st, err := s.W.Prepare(q)
		if err != nil {
			return s.D.Translate("prepare", err)
		}
		s.Stmts[q] = st
	}
	return nil
}

// Close closes the statements New and Prepare prepared; the caller
// closes W and R.
func (s *Store) Close() error {
	err := s.changes.Close()
	for _, st := range s.Stmts {
		err = errors.Join(err, st.Close())
	}
	return err
}

// Beginner is a *sql.DB or a *sql.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Write runs fn in one transaction on W, appends the changes fn returns
// to the changes log in that same transaction, and commits. Errors are
// translated to the store's sentinels, prefixed with op.
func (s *Store) Write(ctx context.Context, op string, fn func(tx *sql.Tx) ([]store.Change, error)) error {
	return s.WriteOn(ctx, op, s.W, fn)
}

// WriteOn is Write on db.
func (s *Store) WriteOn(ctx context.Context, op string, db Beginner, fn func(tx *sql.Tx) ([]store.Change, error)) error {
	if err := s.D.Check(); err != nil {
		return s.D.Translate(op, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return s.D.Translate(op, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	changes, err := fn(tx)
	if err != nil {
		return s.D.Translate(op, err)
	}
	if len(changes) > 0 {
		if err := s.D.LogChanges(ctx, tx, changes); err != nil {
			return s.D.Translate(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.D.Translate(op, err)
	}
	if len(changes) > 0 {
		s.D.Committed()
	}
	return nil
}

// put runs query, one statement, as a write of its own (Write) that logs
// changes.
func (s *Store) put(ctx context.Context, op string, changes []store.Change, query string, args ...any) error {
	return s.Write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, query, args...)
		return changes, err
	})
}

// touch is put for a statement that must touch a row: store.ErrNotFound
// (and nothing written) if it touches none.
func (s *Store) touch(ctx context.Context, op string, changes []store.Change, query string, args ...any) error {
	return s.Write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		return changes, touched(ctx, tx, query, args...)
	})
}

// Querier is a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// collect runs query on R and scans each row with scan; errors are
// translated, prefixed with op.
func collect[T any](ctx context.Context, s *Store, op, query string, scan func(r Scanner) (T, error), args ...any) ([]T, error) {
	out, err := all(ctx, s.R, query, scan, args...)
	if err != nil {
		return nil, s.D.Translate(op, err)
	}
	return out, nil
}

// all runs query on q and scans each row with scan.
func all[T any](ctx context.Context, q Querier, query string, scan func(r Scanner) (T, error), args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	return rowsOf(rows, err, scan)
}

// rowsOf scans each of rows, the answer of a query that returned err,
// with scan, and closes rows.
func rowsOf[T any](rows *sql.Rows, err error, scan func(r Scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	err = EachRow(rows, func(r Scanner) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// one runs query on R, whose answer is one row, and scans it with scan;
// errors are translated (no row: store.ErrNotFound), prefixed with what
// op says, which is asked only then: a read that succeeds formats
// nothing.
func one[T any](ctx context.Context, s *Store, op func() string, query string, scan func(r Scanner) (T, error), args ...any) (T, error) {
	v, err := scan(s.R.QueryRowContext(ctx, query, args...))
	if err != nil {
		var zero T
		return zero, s.D.Translate(op(), err)
	}
	return v, nil
}

// value scans a row of one column.
func value[T any](r Scanner) (T, error) {
	var v T
	err := r.Scan(&v)
	return v, err
}

// each runs query on R and calls row with each row of its answer, in
// order, stopping at row's first error; errors are translated, prefixed
// with op.
func (s *Store) each(ctx context.Context, op, query string, row func(r Scanner) error, args ...any) error {
	return s.D.Translate(op, dbTx{q: s.R, s: s}.Each(ctx, query, args, row))
}

// Translate is a dialect's Translate: err as the store's sentinels,
// prefixed with op; nil for nil. Sentinels already in err are kept,
// sql.ErrNoRows is store.ErrNotFound, and a deadline passed or a closed
// connection or database is store.ErrUnavailable; any other error is the
// sentinel driver says it is (nil: none). store.ErrUnavailable and
// store.ErrRejected keep the driver's message (which holds no values,
// only table and column names) after the sentinel.
func Translate(op string, err error, driver func(err error) error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrRejected) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var sentinel error
	switch {
	case errors.Is(err, sql.ErrNoRows):
		sentinel = store.ErrNotFound
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, sql.ErrConnDone),
		err.Error() == "sql: database is closed": // database/sql keeps this error unexported
		sentinel = store.ErrUnavailable
	default:
		sentinel = driver(err)
	}
	switch sentinel {
	case nil:
		return fmt.Errorf("%s: %w", op, err)
	case store.ErrUnavailable, store.ErrRejected:
		return fmt.Errorf("%s: %w: %w", op, sentinel, err)
	}
	return fmt.Errorf("%s: %w", op, sentinel)
}

// affected runs query, one statement, in tx and returns how many rows it
// touched.
func affected(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// touched runs query, one statement, in tx: store.ErrNotFound if it
// touches no row.
func touched(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	n, err := affected(ctx, tx, query, args...)
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

// NullTime is t as the database stores an optional time: NULL for the
// zero time.
func (s *Store) NullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return s.D.Time(t)
}

// Time is a scan destination for a time column of either database (UTC
// microseconds or a timestamptz), NULL read as the zero time; the time
// read is in UTC.
func Time(t *time.Time) sql.Scanner { return timeDest{t} }

type timeDest struct{ t *time.Time }

func (d timeDest) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.t = time.Time{}
	case int64:
		*d.t = time.UnixMicro(v).UTC()
	case time.Time:
		*d.t = v.UTC()
	default:
		return fmt.Errorf("scan a time: %T is not one", src)
	}
	return nil
}

// Micros is the time stored in SQLite for t: UTC microseconds since the
// Unix epoch.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// Blob is b as a BLOB (bytea) that is never NULL.
func Blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// NullBlob is b as an optional BLOB (bytea): NULL when b is empty.
func NullBlob(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// fromMicros is the time stored as UTC microseconds n, in UTC.
func fromMicros(n int64) time.Time { return time.UnixMicro(n).UTC() }

// decodeWords reads a list of scope words from its JSON array's text (see
// Dialect.WordsJSON); the empty list is nil.
func decodeWords(text string) ([]string, error) {
	var words []string
	if err := json.Unmarshal([]byte(text), &words); err != nil {
		return nil, fmt.Errorf("words: %w", err)
	}
	if len(words) == 0 {
		return nil, nil
	}
	return words, nil
}
