package postgres

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// BenchmarkAddAudit is storetest.BenchmarkAddAudit on a fresh schema; the
// CPU time is this process's (the server's is not counted).
func BenchmarkAddAudit(b *testing.B) {
	storetest.BenchmarkAddAudit(b, func(b *testing.B) store.Audit {
		s, err := Open(context.Background(), postgrestest.Schema(b))
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
