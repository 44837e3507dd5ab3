package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// dialect is SQLite's sqlstore.Dialect: times are UTC microseconds, text
// is ordered by bytes already, a write holds the whole database, a write
// refused once the file is gone (CheckFile), and Listen is told of this
// process's commits.
type dialect struct{ s *Store }

func (dialect) Time(t time.Time) any { return sqlstore.Micros(t) }
func (dialect) Collate() string      { return "" }
func (dialect) ForUpdate() string    { return "" }
func (dialect) ForKeyShare() string  { return "" }
func (d dialect) Check() error       { return d.s.goneErr() }
func (d dialect) Committed()         { d.s.listeners.notify() }

// Now reads the machine's clock to the millisecond (unixepoch's
// 'subsec'), in microseconds.
func (dialect) Now(ago time.Duration) string {
	return "(CAST(unixepoch('subsec') * 1000000 AS INTEGER) - " + strconv.FormatInt(ago.Microseconds(), 10) + ")"
}

func (dialect) NowMilli() string { return "CAST(unixepoch('subsec') * 1000 AS INTEGER)" }

func (dialect) WordsJSON(col string) string { return col }

// Words is words as encoding/json writes them (see appendWords).
func (dialect) Words(words []string) any { return string(appendWords(nil, words)) }

// Bucket divides the microseconds: integer division truncates toward
// zero, and the times kept are after 1970.
func (dialect) Bucket(col, unit string) string {
	d := 24 * time.Hour
	if unit == "hour" {
		d = time.Hour
	}
	n := strconv.FormatInt(d.Microseconds(), 10)
	return "(" + col + " / " + n + " * " + n + ")"
}

func (dialect) Translate(op string, err error) error { return translate(op, err) }

// Spend makes fn's write in the next group (see grouped).
func (d dialect) Spend(ctx context.Context, op string, fn, undo func(ctx context.Context, tx sqlstore.SpendTx) error) error {
	s := d.s
	var u func(ctx context.Context, tx *sql.Tx) ([]store.Change, error)
	if undo != nil {
		u = func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) { return nil, undo(ctx, s.SpendTx(tx)) }
	}
	return s.grouped(ctx, op, func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		return nil, fn(ctx, s.SpendTx(tx))
	}, u)
}

func (d dialect) LogChanges(ctx context.Context, tx *sql.Tx, changes []store.Change) error {
	at := sqlstore.Micros(d.s.now())
	for _, c := range changes {
		if _, err := tx.ExecContext(ctx, "INSERT INTO changes (kind, key, at) VALUES ($1, $2, $3)", c.Kind, c.Key, at); err != nil {
			return err
		}
	}
	return nil
}
