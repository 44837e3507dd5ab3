package admin

import (
	"context"

	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// CacheTokens is prompt-cache use over a span: the calls, and the tokens
// of their prompts read uncached (inputTokens), written to the cache and
// read from it. HitRatio is cacheReadTokens over the three; null when
// there were none.
type CacheTokens struct {
	Calls            int64    `json:"calls"`
	InputTokens      int64    `json:"inputTokens"`
	CacheWriteTokens int64    `json:"cacheWriteTokens"`
	CacheReadTokens  int64    `json:"cacheReadTokens"`
	HitRatio         *float64 `json:"hitRatio"`
}

// CacheLine is the prompt-cache use of one box (named in the fleet's
// report only), payer kind and pool entry (null for calls not paid from
// the operator's pool), in the month and in the last 24 hours.
type CacheLine struct {
	Box     string      `json:"box,omitempty"`
	Payer   string      `json:"payer"`
	Entry   *string     `json:"entry"`
	Month   CacheTokens `json:"month"`
	Last24h CacheTokens `json:"last24h"`
}

// CacheView is the prompt-cache use a spend report carries: the totals in
// the month and in the last 24 hours (the hours from since on, whatever
// the month), and the lines by box, payer kind and entry. A line whose
// last24h ratio is well below its month's is a cache that stopped
// hitting; a new entry's line beside an old one is a box moved to
// another entry of the pool, its cache cold there.
type CacheView struct {
	Since   string      `json:"since"`
	Month   CacheTokens `json:"month"`
	Last24h CacheTokens `json:"last24h"`
	ByEntry []CacheLine `json:"byEntry"`
}

func cacheTokens(c store.CacheUsage) CacheTokens {
	t := CacheTokens{Calls: c.Calls, InputTokens: c.InputTokens, CacheWriteTokens: c.CacheWriteTokens, CacheReadTokens: c.CacheReadTokens}
	if c.CacheReadTokens+c.CacheWriteTokens+c.InputTokens > 0 {
		r := c.HitRatio()
		t.HitRatio = &r
	}
	return t
}

// Cache returns the prompt-cache use of box (the fleet for "") in month
// (YYYY-MM) and in the last 24 hours (spend.Cache).
func (s *Server) Cache(ctx context.Context, box, month string) (CacheView, error) {
	rep, err := spend.Cache(ctx, s.cfg.Store, box, month, s.cfg.Now())
	if err != nil {
		return CacheView{}, err
	}
	out := CacheView{Since: formatTime(rep.Since), Month: cacheTokens(rep.Total.Month), Last24h: cacheTokens(rep.Total.Day),
		ByEntry: make([]CacheLine, 0, len(rep.Lines))}
	for _, l := range rep.Lines {
		if box != "" {
			l.Box = "" // named by the report
		}
		out.ByEntry = append(out.ByEntry, CacheLine{Box: l.Box, Payer: l.PayerKind, Entry: optional(l.Entry),
			Month: cacheTokens(l.Month), Last24h: cacheTokens(l.Day)})
	}
	return out, nil
}
