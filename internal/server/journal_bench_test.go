package server

import (
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
)

// BenchmarkJournal measures what the journal adds to a call: the one
// record a call appends as it completes (its audit entry and its
// settlement in one line, one write(2)) and its share of a batch's begin
// and done lines (one of each per 16 calls), against the baseline of one whole
// forwarded count_tokens call through the broker on loopback (itself
// journaled), measured in the same loop. It reports journal/forward.
func BenchmarkJournal(b *testing.B) {
	srv, _, do := forwardBench(b)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	entry := store.AuditEntry{At: time.Now(), Box: "alpha", Method: "POST", Route: "/llm/anthropic/v1/messages/count_tokens",
		Capability: "inference", Words: []string{"agent"}, Status: 200, Duration: time.Millisecond, Bytes: 20, UpstreamStatus: 200}
	settle := store.Settlement{Box: "alpha", Principal: "shared", Month: "2026-12", Charge: 1234,
		Usage: []store.Usage{{Box: "alpha", Month: "2026-12", PayerKind: "shared", Model: "claude-haiku-4-5", Calls: 1, InputTokens: 10, OutputTokens: 2, Cost: 1234}}}
	j := srv.Journal
	var seqs []uint64
	var forward, journaled time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if s := do("/llm/anthropic/v1/messages/count_tokens", body); s != 200 {
			b.Fatalf("count_tokens = %d", s)
		}
		t1 := time.Now()
		n, err := j.Call(&entry, &settle)
		if err != nil {
			b.Fatal(err)
		}
		seqs = append(seqs, n)
		if i%16 == 15 {
			key := outbox.NewKey()
			j.Begin(key, seqs)
			j.Done(key)
			seqs = seqs[:0]
		}
		forward += t1.Sub(t0)
		journaled += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(forward.Nanoseconds())/float64(b.N), "forward-ns/op")
	b.ReportMetric(float64(journaled.Nanoseconds())/float64(b.N), "journal-ns/op")
	b.ReportMetric(float64(journaled)/float64(forward), "journal/forward")
}
