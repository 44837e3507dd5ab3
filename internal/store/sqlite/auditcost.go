package sqlite

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// dayMicros is a day in the audit table's unit.
const dayMicros = int64(24 * time.Hour / time.Microsecond)

// AuditDays sums box's entries' cost per UTC day since since, over the
// audit_box_at index's range for the box.
func (s *Store) AuditDays(ctx context.Context, box string, since time.Time) ([]store.DayCost, error) {
	const op = "audit days"
	rows, err := s.r.QueryContext(ctx, `SELECT at / ? AS d, sum(cost_micros), count(*) FROM audit
		WHERE box = ? AND at >= ? AND cost_micros > 0 GROUP BY d ORDER BY d`,
		dayMicros, box, micros(since))
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.DayCost
	for rows.Next() {
		var d store.DayCost
		var n int64
		if err := rows.Scan(&n, &d.Cost, &d.Calls); err != nil {
			return nil, translate(op, err)
		}
		d.Day = fromMicros(n * dayMicros)
		out = append(out, d)
	}
	return out, translate(op, rows.Err())
}
