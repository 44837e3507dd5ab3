package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// ListCache returns the prompt-cache use of box ("" for every box) in
// month, by box, payer kind and entry.
func (s *Store) ListCache(ctx context.Context, box, month string) ([]store.CacheUsage, error) {
	return s.listCache(ctx, fmt.Sprintf("prompt cache of box %q in %s", box, month), s.cacheQuery(false), box, month)
}

// ListCacheSince returns the prompt-cache use of box ("" for every box)
// in the kept hours from since's on, by box, payer kind and entry.
func (s *Store) ListCacheSince(ctx context.Context, box string, since time.Time) ([]store.CacheUsage, error) {
	return s.listCache(ctx, fmt.Sprintf("prompt cache of box %q by hour", box), s.cacheQuery(true), box, cacheHour(since))
}

func (s *Store) listCache(ctx context.Context, op, query string, args ...any) ([]store.CacheUsage, error) {
	return collect(ctx, s, op, query, func(r Scanner) (store.CacheUsage, error) {
		var c store.CacheUsage
		err := r.Scan(&c.Box, &c.PayerKind, &c.Entry, &c.Calls, &c.InputTokens, &c.CacheWriteTokens, &c.CacheReadTokens)
		return c, err
	}, args...)
}

// cacheHour is t's hour's number since the Unix epoch, as cache_hours
// keeps it.
func cacheHour(t time.Time) int64 {
	return t.Unix() / 3600
}

// cacheQuery is the query of the prompt-cache sums, for ListCache ($1 the
// box or "" for all, $2 the month) and ListCacheSince ($1 the box or "",
// $2 the first hour's number), its text keys ordered by bytes.
func (s *Store) cacheQuery(since bool) string {
	collate := s.D.Collate()
	from, where := "cache_usage", "month = $2"
	if since {
		from, where = "cache_hours", "hour >= $2"
	}
	return `SELECT box, payer_kind, entry, CAST(SUM(calls) AS BIGINT), CAST(SUM(input_tokens) AS BIGINT),
			CAST(SUM(cache_write_tokens) AS BIGINT), CAST(SUM(cache_read_tokens) AS BIGINT)
		FROM ` + from + ` WHERE ($1 = '' OR box = $1) AND ` + where + `
		GROUP BY box, payer_kind, entry ORDER BY box` + collate + `, payer_kind` + collate + `, entry` + collate
}
