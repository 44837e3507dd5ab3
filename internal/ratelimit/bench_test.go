package ratelimit_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/ratelimit"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// BenchmarkReplicasOvershoot measures how far two replicas sharing a
// PostgreSQL store pass a requests-a-minute limit between them, under a
// load of twice the limit, exchanging their counts every second through
// the store as Run does. Time is simulated (a clock moved by hand, ten
// steps a second, for three minutes), so the figure does not depend on
// the machine; the exchanges are real round trips to PostgreSQL. It
// reports the most requests admitted in any sixty seconds as a share of
// the limit (overshoot-%: 0 is none), for the load spread evenly over
// the replicas and for all of it on one while the other has some too.
func BenchmarkReplicasOvershoot(b *testing.B) {
	dsn := postgrestest.Schema(b)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		b.Fatal(err)
	}
	const limit = 600 // requests a minute
	if err := st.SetRateLimit(ctx, store.RateLimit{Box: "alpha", RPM: limit, UpdatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	tests := []struct {
		name string
		// share is each replica's part of the load.
		share [2]float64
	}{
		{"even", [2]float64{0.5, 0.5}},
		{"uneven", [2]float64{0.9, 0.1}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			var worst float64
			for i := range b.N {
				start := time.Unix(2_000_000_000+int64(i)*10_000, 0)
				worst = max(worst, simulate(b, st, start, limit, tt.share))
			}
			b.ReportMetric(worst, "overshoot-%")
		})
	}
}

// simulate runs two replicas for three simulated minutes under a load of
// twice limit a minute split by share, and returns by how much, in
// percent of limit, the most admitted in any sixty seconds passed it.
func simulate(b *testing.B, st store.RateLimits, start time.Time, limit int, share [2]float64) float64 {
	ctx := context.Background()
	now := start
	clock := func() time.Time { return now }
	var ls [2]*ratelimit.Limiter
	for i := range ls {
		l, err := ratelimit.New(ratelimit.Config{Store: st, Exchange: true, Now: clock, Replica: start.Format("150405") + string(rune('a'+i))})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Round(ctx); err != nil {
			b.Fatal(err)
		}
		ls[i] = l
	}
	const steps = 10 // a second
	perStep := 2 * float64(limit) / 60 / steps
	var admitted []int // by step
	var owed [2]float64
	for step := range 180 * steps {
		n := 0
		for i, l := range ls {
			owed[i] += perStep * share[i]
			for owed[i] >= 1 {
				owed[i]--
				if l.Admit("alpha", enrolled, "") == nil {
					n++
				}
			}
		}
		admitted = append(admitted, n)
		now = now.Add(time.Second / steps)
		if (step+1)%steps == 0 {
			for _, l := range ls {
				if err := l.Round(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	most, sum := 0, 0
	for i, n := range admitted {
		sum += n
		if i >= 60*steps {
			sum -= admitted[i-60*steps]
		}
		most = max(most, sum)
	}
	return max(0, float64(most-limit)/float64(limit)*100)
}

// BenchmarkAdmit measures Admit and Charge of a metered call from every
// core at once, for a box with no limit while another box has one (the
// common case: a call that no limit covers), and for the box with the
// limit, as a ratio of the two in the same run.
func BenchmarkAdmit(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "boxbroker.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	for _, name := range []string{"alpha", "limited"} {
		if err := st.CreateBox(ctx, store.Box{Name: name, TokenHash: name, CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.SetRateLimit(ctx, store.RateLimit{Box: "limited", RPM: 1 << 40, UpdatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	l, err := ratelimit.New(ratelimit.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Round(ctx); err != nil {
		b.Fatal(err)
	}
	for _, box := range []string{"alpha", "limited"} {
		b.Run(box, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if f := l.Admit(box, enrolled, "github:someone"); f != nil {
						b.Fatalf("Admit(%s) refused: %+v", box, f)
					}
					l.Charge(box, enrolled, "github:someone", 100, 10)
				}
			})
		})
	}
}
