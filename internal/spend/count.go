package spend

import "github.com/intentius/boxbroker/internal/store"

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

// count tells the Meter's Counter of rows, the usage of one request.
func (m *Meter) count(payer string, rows []store.Usage) {
	if m.cfg.Counter == nil {
		return
	}
	for _, u := range rows {
		m.cfg.Counter.Usage(u.Model, payer, u.Cost, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
	}
}
