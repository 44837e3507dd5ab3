package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
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

// BenchmarkApplySpooled is one spooled batch as a loaded broker writes
// it: 64 calls of 2 boxes, 2 principals and 2 models, each with its usage
// row and prompt-cache row, and their 64 audit entries. Reports ns/call.
func BenchmarkApplySpooled(b *testing.B) {
	const calls = 64
	s, err := Open(filepath.Join(b.TempDir(), "boxbroker.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := b.Context()
	boxes := []string{"salad", "soup"}
	for _, name := range boxes {
		if err := s.CreateBox(ctx, store.Box{Name: name, TokenHash: "h-" + name, CreatedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	hour := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	settle := make([]store.Settlement, calls)
	audit := make([]store.AuditEntry, calls)
	for i := range settle {
		box, principal, model := boxes[i%2], []string{"", "agent"}[i/2%2], []string{"claude-haiku-4-5", "claude-sonnet-4-5"}[i/4%2]
		payer := "shared"
		if principal != "" {
			payer = "principal"
		}
		settle[i] = store.Settlement{Box: box, Principal: principal, Month: "2026-12", Charge: 100,
			Usage: []store.Usage{{Box: box, Month: "2026-12", PayerKind: payer, Principal: principal, Model: model,
				Calls: 1, InputTokens: 10, OutputTokens: 5, Cost: 100}},
			Cache: []store.CacheUsage{{Box: box, PayerKind: payer, Entry: "default", Hour: hour, Calls: 1, InputTokens: 10, CacheReadTokens: 990}}}
		audit[i] = store.AuditEntry{Box: box, At: hour, Method: "POST", Route: "/llm/anthropic/v1/messages", Capability: "inference",
			Words: []string{"agent"}, Status: 200, Duration: 850 * time.Microsecond, UpstreamStatus: 200}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.ApplySpooled(ctx, fmt.Sprintf("k%d", i), settle, audit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}
