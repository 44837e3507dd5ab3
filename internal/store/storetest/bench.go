//go:build unix

package storetest

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// BenchmarkAddAudit measures writing 10,000 audit entries into the store
// open returns (a fresh one for each batch size), in batches the size the
// audit Writer forms under load (256, its default) and under lighter
// load, each with a context of its own as the Writer gives it. It reports
// the wall time and the process's CPU time (user and system, every
// thread; a server in another process is not counted) per entry.
func BenchmarkAddAudit(b *testing.B, open func(b *testing.B) store.Audit) {
	const n = 10000
	for _, batch := range []int{256, 16, 1} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := open(b)
			entries := benchAuditEntries(batch)
			at := time.Now()
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				for done := 0; done < n; done += batch {
					// Time moves on, as in a log: entries come in order.
					for i := range entries {
						entries[i].At = at
						at = at.Add(time.Microsecond)
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					err := s.AddAudit(ctx, entries)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			entriesDone := float64(b.N * (n + batch - 1) / batch * batch)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/entriesDone, "µs/entry")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/1e3/entriesDone, "cpu-µs/entry")
		})
	}
}

// benchAuditEntries is n entries like those a loaded broker logs: mostly
// forwarded Messages calls, one refusal in sixteen.
func benchAuditEntries(n int) []store.AuditEntry {
	out := make([]store.AuditEntry, n)
	for i := range out {
		e := store.AuditEntry{Box: "alpha", Method: "POST",
			Route: "/llm/anthropic/v1/messages", Capability: "inference", Words: []string{"agent"}, Status: 200,
			Duration: 850 * time.Microsecond, UpstreamStatus: 200}
		if i%16 == 15 {
			e.Status, e.Reason, e.UpstreamStatus = 403, "declaration", 0
			e.Message = "This box's inference capability does not list decide in its scope (it lists agent)."
		}
		out[i] = e
	}
	return out
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkApplySpooled is one spooled batch as a loaded broker writes
// it: 64 calls of 2 boxes, 2 principals and 2 models, each with its usage
// row and prompt-cache row, and their 64 audit entries. Reports ns/call.
// open must return a new, empty store.
func BenchmarkApplySpooled(b *testing.B, open func(b *testing.B) store.Store) {
	const calls = 64
	s := open(b)
	ctx := b.Context()
	boxes := []string{"salad", "soup"}
	for _, name := range boxes {
		mustCreateBox(b, s, name)
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

// BenchmarkSettle is one call's settlement, its usage row alone and with
// its prompt-cache row (two upserts more, the month's and the hour's, and
// the database's clock, which bounds the hour): by Settle, and by
// ApplySpooled under a key of its own, as the outbox writes each call's.
// open must return a new, empty store.
func BenchmarkSettle(b *testing.B, open func(b *testing.B) store.Store) {
	for _, spooled := range []bool{false, true} {
		for _, withCache := range []bool{false, true} {
			name := "usage"
			if withCache {
				name += "+cache"
			}
			if spooled {
				name = "spooled/" + name
			}
			b.Run(name, func(b *testing.B) {
				s := open(b)
				ctx := b.Context()
				mustCreateBox(b, s, "salad")
				hour := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
				st := store.Settlement{Box: "salad", Month: "2026-12", Charge: 100, Usage: []store.Usage{{Box: "salad", Month: "2026-12",
					PayerKind: "shared", Model: "claude-haiku-4-5", Calls: 1, InputTokens: 10, OutputTokens: 5, Cost: 100}}}
				if withCache {
					st.Cache = []store.CacheUsage{{Box: "salad", PayerKind: "shared", Entry: "default", Hour: hour, Calls: 1, InputTokens: 10, CacheReadTokens: 990}}
				}
				b.ResetTimer()
				for i := range b.N {
					var err error
					if spooled {
						_, err = s.ApplySpooled(ctx, fmt.Sprintf("k%d", i), []store.Settlement{st}, nil)
					} else {
						err = s.Settle(ctx, st)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAddFeedbackAtBound measures appending a 1 KiB feedback batch
// to a box at its bound (10,000 batches, 64 MiB: the feedback
// capability's) against appending one to a box that keeps one batch,
// each append dropping the box's oldest batch, in the same run. It
// reports µs per append of each and their ratio, which a bound checked
// at a constant cost keeps near 1. open must return a new, empty store.
func BenchmarkAddFeedbackAtBound(b *testing.B, open func(b *testing.B) store.Store) {
	const kept = 10000
	s := open(b)
	ctx := b.Context()
	body := make([]byte, 1024)
	mustCreateBox(b, s, "empty")
	mustCreateBox(b, s, "full")
	add := func(box string, bound store.FeedbackBound) {
		if _, err := addFeedback(ctx, s, store.FeedbackBatch{Box: box, At: time.Now(), Words: []string{"agent"}, Body: body}, bound); err != nil {
			b.Fatal(err)
		}
	}
	for range kept {
		add("full", store.FeedbackBound{})
	}
	var empty, full time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		add("empty", store.FeedbackBound{Batches: 1})
		t1 := time.Now()
		add("full", store.FeedbackBound{Batches: kept, Bytes: 64 << 20})
		empty, full = empty+t1.Sub(t0), full+time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(empty.Microseconds())/float64(b.N), "empty-µs/append")
	b.ReportMetric(float64(full.Microseconds())/float64(b.N), "bound-µs/append")
	b.ReportMetric(float64(full)/float64(empty), "bound/empty")
}
