package sqlstore

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// AuditDays sums box's entries' cost per UTC day since since, over the
// audit_box_at index's range for the box.
func (s *Store) AuditDays(ctx context.Context, box string, since time.Time) ([]store.DayCost, error) {
	return collect(ctx, s, "audit days", `SELECT `+s.D.Bucket("at", "day")+` AS d, CAST(sum(cost_micros) AS BIGINT), count(*) FROM audit
		WHERE box = $1 AND at >= $2 AND cost_micros > 0 GROUP BY d ORDER BY d`,
		func(r Scanner) (store.DayCost, error) {
			var d store.DayCost
			err := r.Scan(Time(&d.Day), &d.Cost, &d.Calls)
			return d, err
		}, box, s.D.Time(since))
}
