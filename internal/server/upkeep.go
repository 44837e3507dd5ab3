package server

import (
	"context"
	"time"
)

// Change log upkeep: how long changes are kept, by the store's clock,
// far longer than a cache may go unpolled before it drops everything (5
// minutes), and how often older ones are pruned. Every replica prunes;
// the deletes are idempotent.
const (
	keepChanges = time.Hour
	pruneEvery  = 10 * time.Minute
)

// pruneChanges forgets changes older than keepChanges, at once and every
// pruneEvery, until ctx ends.
func (s *Server) pruneChanges(ctx context.Context) {
	every(ctx, pruneEvery, func() bool {
		if err := s.Store.PruneChanges(ctx, keepChanges); err != nil && ctx.Err() == nil {
			s.log.Warn("prune the change log", "err", err)
		}
		return true
	})
}

// every calls f at once and then every d, until ctx ends or f reports
// false.
func every(ctx context.Context, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for f() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
