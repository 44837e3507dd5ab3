package outbox

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// nopStore is an Store that keeps nothing.
type nopStore struct{}

func (nopStore) AddAudit(ctx context.Context, es []store.AuditEntry) error { return nil }
func (nopStore) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	return nil, nil
}
func (nopStore) PruneAudit(ctx context.Context, before time.Time) (int64, error) { return 0, nil }
func (nopStore) ApplySpooled(context.Context, string, []store.Settlement, []store.AuditEntry) (bool, error) {
	return true, nil
}

// BenchmarkWriter measures what the Writer itself costs an entry, over a
// store that keeps nothing, when entries come as a broker's requests end:
// one at a time, with a pause between them (sleep=50µs) in which the
// Writer can wait for the next. It reports the time Add takes and the
// process's CPU time per entry (user and system, every thread, the
// pauses included); the pause alone is measured as none=1.
func BenchmarkWriter(b *testing.B) {
	for _, tt := range []struct {
		name   string
		linger time.Duration
		add    bool
	}{
		{"none=1", 0, false},
		{"linger=0", 0, true},
		{"linger=50ms", 50 * time.Millisecond, true},
	} {
		b.Run(tt.name, func(b *testing.B) {
			w := NewWriter(nopStore{}, AuditOptions{Linger: tt.linger})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { w.Run(ctx); close(done) }()
			e := store.AuditEntry{Box: "alpha", At: time.Now(), Method: "POST", Route: "/llm/anthropic/v1/messages",
				Capability: "inference", Words: []string{"agent"}, Status: 200, Duration: time.Millisecond, UpstreamStatus: 200}
			var add time.Duration
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				time.Sleep(50 * time.Microsecond)
				if tt.add {
					t0 := time.Now()
					w.Add(e)
					add += time.Since(t0)
				}
			}
			if err := w.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/entry")
			b.ReportMetric(float64(add.Nanoseconds())/float64(b.N), "add-ns/op")
			b.ReportMetric(float64(w.Dropped()), "dropped")
			cancel()
			<-done
		})
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
