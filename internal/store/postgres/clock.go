package postgres

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/store/deadline"
)

// Clock returns the PostgreSQL server's clock now (clock_timestamp(),
// not the transaction's start), so that replicas can judge reservation
// leases by one clock whatever their own say (see spend.Config.StoreClock).
func (s *Store) Clock(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.around(ctx, deadline.Op{Name: "read the store's clock", Kind: deadline.Read}, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
	})
	if err != nil {
		return time.Time{}, translate("read the store's clock", err)
	}
	return t.UTC(), nil
}
