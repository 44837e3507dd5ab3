package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// AuditDays sums box's entries' cost per UTC day since since, over the
// audit_box_at index's range for the box.
func (s *Store) AuditDays(ctx context.Context, box string, since time.Time) ([]store.DayCost, error) {
	const op = "audit days"
	rows, err := s.pool.Query(ctx, `SELECT date_trunc('day', at AT TIME ZONE 'UTC') AS d, sum(cost_micros)::bigint, count(*)
		FROM audit WHERE box = $1 AND at >= $2 AND cost_micros > 0 GROUP BY d ORDER BY d`, box, since)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.DayCost, error) {
		var d store.DayCost
		var t time.Time
		err := r.Scan(&t, &d.Cost, &d.Calls)
		d.Day = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d, err
	})
	return out, translate(op, err)
}
