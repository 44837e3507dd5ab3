package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// RenewReservations sets the time of each reservation in ids still held
// to at; see store.Spend.
func (s *Store) RenewReservations(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, "renew reservations", func(tx pgx.Tx) ([]store.Change, error) {
		_, err := tx.Exec(ctx, "UPDATE reservations SET at = $1 WHERE id = ANY($2)", at.UTC(), ids)
		return nil, err
	})
}
