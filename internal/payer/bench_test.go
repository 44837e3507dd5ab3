package payer_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
)

// BenchmarkGrantCheck measures what deciding the payer costs with a valid
// grant (two store reads and an unseal), and with an unknown one (one
// store read), as a ratio to the baseline of no grant (the cache alone),
// all measured in this run on the SQLite store.
func BenchmarkGrantCheck(b *testing.B) {
	f := newFixture(b)
	value, _ := f.issue(b, "a", visitor, time.Hour)
	box, err := f.Server.Store.Box(context.Background(), "a")
	if err != nil {
		b.Fatal(err)
	}
	pay := f.Server.Payer.Func(box, box.TokenHash)
	measure := func(grant, want string) time.Duration {
		r := httptest.NewRequest("POST", messages, nil)
		if grant != "" {
			r.Header.Set(protocol.HeaderGrant, grant)
		}
		start := time.Now()
		for range b.N {
			paid, err := pay(r.Context(), r)
			if err != nil || protocol.FormatPayerHeader(paid.Payer) != want {
				b.Fatalf("payer = %v, %v, want %s", paid.Payer, err, want)
			}
		}
		return time.Since(start)
	}
	b.ResetTimer()
	base := measure("", "shared")
	granted := measure(value, "visitor "+visitor)
	unknown := measure("bbg_unknown", "shared")
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(base.Nanoseconds())/n, "ns/none")
	b.ReportMetric(float64(granted.Nanoseconds())/n, "ns/grant")
	b.ReportMetric(float64(unknown.Nanoseconds())/n, "ns/unknown")
	b.ReportMetric(float64(granted)/float64(base), "grant/none")
	b.ReportMetric(float64(unknown)/float64(base), "unknown/none")
}
