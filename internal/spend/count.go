package spend

import (
	"context"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// Counter is told what the model calls of each request measured as they
// settle, for the broker's metrics (*metrics.Metrics is one): once per
// model the request's calls named, with its payer's kind, the cost
// measured in micro-dollars (what was read whole and priced; an
// unmeasured or unpriced call adds none of its charge), and the tokens
// its answers reported. It is called on the settling goroutine and must
// not block.
type Counter interface {
	Usage(model, payer string, costMicros, input, output, cacheRead, cacheWrite int64)
}

// count tells the Meter's Counter, and the request's trace (ctx's), of
// rows, the usage of one request.
func (m *Meter) count(ctx context.Context, payer string, rows []store.Usage) {
	for _, u := range rows {
		if m.cfg.Counter != nil {
			m.cfg.Counter.Usage(u.Model, payer, u.Cost, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
		}
		telemetry.Usage(ctx, u.Model, payer, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
	}
}
