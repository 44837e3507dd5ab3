package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/spendsql"
)

// ListCache returns the prompt-cache use of box ("" for every box) in
// month, by box, payer kind and entry.
func (s *Store) ListCache(ctx context.Context, box, month string) ([]store.CacheUsage, error) {
	return s.listCache(ctx, fmt.Sprintf("prompt cache of box %q in %s", box, month), spendsql.CacheQuery(false, s.D.Collate()), box, month)
}

// ListCacheSince returns the prompt-cache use of box ("" for every box)
// in the kept hours from since's on, by box, payer kind and entry.
func (s *Store) ListCacheSince(ctx context.Context, box string, since time.Time) ([]store.CacheUsage, error) {
	return s.listCache(ctx, fmt.Sprintf("prompt cache of box %q by hour", box), spendsql.CacheQuery(true, s.D.Collate()), box, spendsql.CacheHour(since))
}

func (s *Store) listCache(ctx context.Context, op, query string, args ...any) ([]store.CacheUsage, error) {
	return collect(ctx, s, s.R, op, query, func(r Scanner) (store.CacheUsage, error) {
		var c store.CacheUsage
		err := r.Scan(&c.Box, &c.PayerKind, &c.Entry, &c.Calls, &c.InputTokens, &c.CacheWriteTokens, &c.CacheReadTokens)
		return c, err
	}, args...)
}
