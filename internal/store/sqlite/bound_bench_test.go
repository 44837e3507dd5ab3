package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// BenchmarkBox_Bound reads a box (one query, one row) on a store opened
// as it is and on one whose driver operations run through a Bound: the
// ratio is what the bound costs a read that misses the cache.
func BenchmarkBox_Bound(b *testing.B) {
	for _, bounded := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "bounded"}[bounded]
		b.Run(name, func(b *testing.B) {
			var opts []Option
			if bounded {
				opts = append(opts, WithAround(deadline.New(time.Second, nil).Around))
			}
			s, ctx := boxStore(b, opts...)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Box(ctx, "alpha"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBox_Parallel reads a box from many goroutines at once (64 a
// CPU), as a burst of requests that miss the cache does, through a
// Bound: what the read pool costs each read when the readers far
// outnumber its connections.
func BenchmarkBox_Parallel(b *testing.B) {
	s, ctx := boxStore(b, WithAround(deadline.New(time.Second, nil).Around))
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Box(ctx, "alpha"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// boxStore opens a store with opts on a new file, closed when b ends,
// holding the box alpha.
func boxStore(b *testing.B, opts ...Option) (*Store, context.Context) {
	s, err := Open(filepath.Join(b.TempDir(), "b.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := b.Context()
	if err := s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		b.Fatal(err)
	}
	return s, ctx
}
