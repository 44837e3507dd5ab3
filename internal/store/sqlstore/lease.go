package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// RenewReservations sets the time of each reservation in ids still held
// to at, or to the database's clock when at is zero; see store.Spend.
// The ids go 500 a statement, below SQLite's bound on a statement's
// parameters.
func (s *Store) RenewReservations(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	return s.Write(ctx, "renew reservations", func(tx *sql.Tx) ([]store.Change, error) {
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), 500)]
			ids = ids[len(chunk):]
			args := make([]any, 0, len(chunk)+1)
			args = append(args, s.NullTime(at))
			for _, id := range chunk {
				args = append(args, id)
			}
			if _, err := tx.ExecContext(ctx, "UPDATE reservations SET at = COALESCE($1, "+s.D.Now(0)+") WHERE id IN "+in(2, len(chunk)), args...); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
}
