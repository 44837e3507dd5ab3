package server

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/pool"
)

// poolStats reads the pool's entries for a metrics scrape, within a
// second; a scrape that cannot read them shows none.
func poolStats(p *pool.Pool) func() []metrics.PoolEntry {
	return func() []metrics.PoolEntry {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		stats, err := p.Health(ctx)
		if err != nil {
			return nil
		}
		out := make([]metrics.PoolEntry, len(stats))
		for i, s := range stats {
			out[i] = metrics.PoolEntry{Name: s.Name, Requests: s.Requests, R429: s.R429, R529: s.R529,
				Failovers: s.Failovers, Failures: s.Failures,
				Cooling: s.State == pool.StateCooling, Failed: s.State == pool.StateFailed}
		}
		return out
	}
}
