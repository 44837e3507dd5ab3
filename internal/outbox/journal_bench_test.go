package outbox

import (
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// BenchmarkAudit is one audit entry journaled — its encoding and one
// write(2) — with its share of a batch's begin and done lines (one of
// each per 16 entries).
func BenchmarkAudit(b *testing.B) {
	j, _, err := OpenJournal(b.TempDir(), 0, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	e := store.AuditEntry{At: time.Now(), Box: "alpha", Method: "POST", Route: "/llm/anthropic/v1/messages",
		Capability: "inference", Words: []string{"agent"}, Status: 200, Duration: time.Millisecond, Bytes: 20, UpstreamStatus: 200}
	var seqs []uint64
	b.ReportAllocs()
	for i := range b.N {
		n, err := j.Audit(e)
		if err != nil {
			b.Fatal(err)
		}
		seqs = append(seqs, n)
		if i%16 == 15 {
			j.Begin("k", seqs)
			j.Done("k")
			seqs = seqs[:0]
		}
	}
}
