package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// BenchmarkSettle is one call's settlement, its usage row alone and with
// its prompt-cache row (two upserts more: the month's and the hour's).
func BenchmarkSettle(b *testing.B) {
	for _, withCache := range []bool{false, true} {
		name := "usage"
		if withCache {
			name = "usage+cache"
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "boxbroker.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			ctx := b.Context()
			if err := s.CreateBox(ctx, store.Box{Name: "salad", TokenHash: "h", CreatedAt: time.Now()}); err != nil {
				b.Fatal(err)
			}
			hour := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
			st := store.Settlement{Box: "salad", Month: "2026-12", Charge: 100, Usage: []store.Usage{{Box: "salad", Month: "2026-12",
				PayerKind: "shared", Model: "claude-haiku-4-5", Calls: 1, InputTokens: 10, OutputTokens: 5, Cost: 100}}}
			if withCache {
				st.Cache = []store.CacheUsage{{Box: "salad", PayerKind: "shared", Entry: "default", Hour: hour, Calls: 1, InputTokens: 10, CacheReadTokens: 990}}
			}
			b.ResetTimer()
			for range b.N {
				if err := s.Settle(ctx, st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplySpooled is storetest.BenchmarkApplySpooled on a file.
func BenchmarkApplySpooled(b *testing.B) {
	storetest.BenchmarkApplySpooled(b, benchStore)
}

// benchStore is a store on a new file in b's temporary directory, closed
// when b ends.
func benchStore(b *testing.B) store.Store {
	s, err := Open(filepath.Join(b.TempDir(), "boxbroker.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
