package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// dialect is SQLite's sqlstore.Dialect: times are UTC microseconds, text
// is ordered by bytes already, a write holds the whole database, a write
// refused once the file is gone (CheckFile), and Listen is told of this
// process's commits.
type dialect struct{ s *Store }

func (dialect) Time(t time.Time) any { return micros(t) }
func (dialect) Collate() string      { return "" }
func (dialect) ForUpdate() string    { return "" }
func (d dialect) Check() error       { return d.s.goneErr() }
func (d dialect) Committed()         { d.s.listeners.notify() }

func (dialect) Translate(op string, err error) error { return translate(op, err) }

func (d dialect) LogChanges(ctx context.Context, tx *sql.Tx, changes []store.Change) error {
	at := micros(d.s.now())
	for _, c := range changes {
		if _, err := tx.ExecContext(ctx, "INSERT INTO changes (kind, key, at) VALUES ($1, $2, $3)", c.Kind, c.Key, at); err != nil {
			return err
		}
	}
	return nil
}
