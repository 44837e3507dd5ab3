package store

import (
	"context"
	"time"
)

// CacheUsage is how a box's model calls used the prompt cache: the
// tokens their answers' usage reported as read from the cache, written to
// it, and read uncached, by payer kind and by the entry of the operator's
// credential pool that served them (Entry "" for a call not paid from the
// pool).
type CacheUsage struct {
	Box       string
	PayerKind string
	Entry     string
	// Hour is the UTC hour the calls settled in, truncated to the hour;
	// zero in a sum over hours.
	Hour             time.Time
	Calls            int64
	InputTokens      int64
	CacheWriteTokens int64
	CacheReadTokens  int64
}

// HitRatio is the share of the prompt's tokens read from the cache:
// CacheRead / (CacheRead + CacheWrite + Input), 0 when there were none.
func (c CacheUsage) HitRatio() float64 {
	all := c.CacheReadTokens + c.CacheWriteTokens + c.InputTokens
	if all <= 0 {
		return 0
	}
	return float64(c.CacheReadTokens) / float64(all)
}

// Add adds o's calls and tokens to c, each sum held at the int64's
// bound (AddCapped).
func (c *CacheUsage) Add(o CacheUsage) {
	c.Calls = AddCapped(c.Calls, o.Calls)
	c.InputTokens = AddCapped(c.InputTokens, o.InputTokens)
	c.CacheWriteTokens = AddCapped(c.CacheWriteTokens, o.CacheWriteTokens)
	c.CacheReadTokens = AddCapped(c.CacheReadTokens, o.CacheReadTokens)
}

// CacheHours is how many of the last hours of prompt-cache use a store
// keeps, hour by hour; older hours are kept only in their month's sums.
const CacheHours = 24

// PromptCache reads the prompt-cache use Settle records (see
// Settlement.Cache): month sums, and hourly sums of the last CacheHours
// hours, each by box, payer kind and pool entry.
type PromptCache interface {
	// ListCache returns the prompt-cache use of box (every box for "")
	// in month (YYYY-MM, the month of the hour each call settled in),
	// ordered by box, payer kind and entry, with Hour zero.
	ListCache(ctx context.Context, box, month string) ([]CacheUsage, error)
	// ListCacheSince returns the prompt-cache use of box (every box for
	// "") in the hours from since's (truncated to the hour) on, summed
	// over those hours and ordered by box, payer kind and entry, with
	// Hour zero. Only the last CacheHours hours are kept: a since before
	// them sums what is kept.
	ListCacheSince(ctx context.Context, box string, since time.Time) ([]CacheUsage, error)
}
