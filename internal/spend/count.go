package spend

import (
	"context"
	"slices"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// Counter is told what the model calls of each request measured as they
// settle, for the broker's metrics (*metrics.Metrics is one): once per
// model the request's calls named, with its payer's kind, whether an
// upstream's answer named the model (not only the request), the cost
// measured in micro-dollars (what was read whole and priced; an
// unmeasured or unpriced call adds none of its charge), and the tokens
// its answers reported. It is called on the settling goroutine and must
// not block.
type Counter interface {
	Usage(model, payer string, answered bool, costMicros, input, output, cacheRead, cacheWrite int64)
}

// count tells the Meter's Counter, and the request's trace (ctx's), of
// rows, the usage of one request; answered are the models of rows an
// upstream's answer named.
func (m *Meter) count(ctx context.Context, payer string, rows []store.Usage, answered []string) {
	for _, u := range rows {
		if m.cfg.Counter != nil {
			m.cfg.Counter.Usage(u.Model, payer, slices.Contains(answered, u.Model), u.Cost, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
		}
		telemetry.Usage(ctx, u.Model, payer, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
	}
}
