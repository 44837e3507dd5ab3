package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// RenewReservations sets the time of each reservation in ids still held
// to at, in one transaction; see store.Spend.
func (s *Store) RenewReservations(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, "renew reservations", func(tx *sql.Tx) ([]store.Change, error) {
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), 500)]
			ids = ids[len(chunk):]
			args := make([]any, 0, len(chunk)+1)
			args = append(args, micros(at))
			for _, id := range chunk {
				args = append(args, id)
			}
			q := "UPDATE reservations SET at = ? WHERE id IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
}
