package admin

import (
	"context"

	"github.com/intentius/boxbroker/internal/spend"
)

// FleetTotal is FleetSpend's totals for month alone, its lists empty:
// what the owner's page's fleet line shows, read as two sums in the
// store rather than row by row.
func (s *Server) FleetTotal(ctx context.Context, month string) (FleetSpend, error) {
	t, err := s.cfg.Store.FleetTotal(ctx, month)
	if err != nil {
		return FleetSpend{}, err
	}
	return FleetSpend{Month: month, SpendCounts: countsOf(t.Usage), ChargedUSD: spend.Dollars(t.Charged)}, nil
}
