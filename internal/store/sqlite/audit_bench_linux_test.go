package sqlite

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// BenchmarkAddAudit is storetest.BenchmarkAddAudit on a store in a
// temporary directory; the CPU time counts every thread of the process.
func BenchmarkAddAudit(b *testing.B) {
	storetest.BenchmarkAddAudit(b, func(b *testing.B) store.Audit {
		s, err := Open(filepath.Join(b.TempDir(), "boxbroker.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}, cpuTime)
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
