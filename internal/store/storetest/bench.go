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
