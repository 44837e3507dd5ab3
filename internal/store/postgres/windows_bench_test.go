package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// BenchmarkWindowBudgetTwoReplicas reserves against one box's daily
// budget from two stores on the same database (two replicas' pools), 16
// callers each, beside its monthly budget, until the day's budget is
// spent, and settles each call as it ends (charging what it held). It
// reports the most held and charged at any moment past the limit
// (overshoot-%: 0 means the budget held as a ceiling) and the time of a
// reservation and its settlement (ns/op).
func BenchmarkWindowBudgetTwoReplicas(b *testing.B) {
	dsn := postgrestest.Schema(b)
	ctx := context.Background()
	var reps [2]*Store
	for i := range reps {
		s, err := Open(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		reps[i] = s
	}
	if err := reps[0].CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		b.Fatal(err)
	}
	const amount = 10
	limit := int64(b.N) * amount / 2 // half the calls fit
	if err := reps[0].SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1 << 50, UpdatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	if err := reps[0].SetWindowBudget(ctx, store.Budget{Box: "alpha", Window: "day", Limit: limit, UpdatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	day := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var next atomic.Int64
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range 32 {
		st := reps[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				id, err := st.Reserve(ctx, store.Reservation{Box: "alpha", Month: "2026-12", Amount: amount, At: day})
				if errors.Is(err, store.ErrOverBudget) {
					refused.Add(1)
					continue
				}
				if err != nil {
					b.Error(err)
					return
				}
				admitted.Add(1)
				if err := st.Settle(ctx, store.Settlement{Reservation: id, Box: "alpha", Month: "2026-12", Charge: amount, At: day}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	ts, err := reps[1].WindowTallies(ctx, "alpha", day)
	if err != nil || len(ts) != 1 {
		b.Fatalf("WindowTallies = %v, %v", ts, err)
	}
	over := max(0, float64(ts[0].Spent+ts[0].Reserved-limit)/float64(limit)*100)
	if admitted.Load()*amount > limit {
		over = max(over, float64(admitted.Load()*amount-limit)/float64(limit)*100)
	}
	b.ReportMetric(over, "overshoot-%")
	b.ReportMetric(float64(admitted.Load()), "admitted")
}
