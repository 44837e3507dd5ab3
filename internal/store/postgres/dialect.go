package postgres

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// dialect is PostgreSQL's sqlstore.Dialect: times are timestamptz, text
// is ordered by bytes with COLLATE "C", rows read in a write are locked
// FOR UPDATE, and a write's changes are logged under changesLock and
// notified to every Listen when it commits.
type dialect struct{ s *Store }

func (dialect) Time(t time.Time) any { return t.UTC() }
func (dialect) Collate() string      { return ` COLLATE "C"` }
func (dialect) ForUpdate() string    { return " FOR UPDATE" }
func (dialect) ForKeyShare() string  { return " FOR KEY SHARE" }
func (dialect) Check() error         { return nil }
func (dialect) Committed()           {}

// Now reads the server's clock as it runs (clock_timestamp(), as Clock
// does), not the transaction's start.
func (dialect) Now(ago time.Duration) string {
	return "(clock_timestamp() - interval '" + strconv.FormatInt(ago.Microseconds(), 10) + " microseconds')"
}

func (dialect) NowMilli() string {
	return "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint)"
}

func (dialect) WordsJSON(col string) string { return "array_to_json(" + col + ")::text" }

func (dialect) Words(words []string) any {
	if words == nil {
		words = []string{}
	}
	return words
}

func (dialect) Bucket(col, unit string) string {
	return "date_trunc('" + unit + "', " + col + " AT TIME ZONE 'UTC')"
}

func (dialect) Translate(op string, err error) error { return translate(op, err) }

// LogChanges appends changes to the changes log last in tx, under
// changesLock, so that changes commit in Seq order, and notifies the
// store's channel, delivered when tx commits.
func (d dialect) LogChanges(ctx context.Context, tx *sql.Tx, changes []store.Change) error {
	kinds := make([]string, len(changes))
	keys := make([]string, len(changes))
	for i, c := range changes {
		kinds[i], keys[i] = c.Kind, c.Key
	}
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", changesLock); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO changes (kind, key, at)
		SELECT kind, key, now() FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS c (kind, key, n) ORDER BY n`,
		kinds, keys); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "NOTIFY "+d.s.channel)
	return err
}
