package postgres

import (
	"context"
	"time"
)

// Clock returns the PostgreSQL server's clock now (clock_timestamp(),
// not the transaction's start), so that replicas can judge reservation
// leases by one clock whatever their own say (see spend.Config.StoreClock).
func (s *Store) Clock(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, translate("read the store's clock", err)
	}
	return t.UTC(), nil
}
