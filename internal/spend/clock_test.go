package spend_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// TestLease_ClockAheadJudgesByTheStoresClock: a Meter whose clock runs
// ten minutes ahead of its store's (StoreClock) releases a reservation
// no one renewed within the lease by the store's clock, and keeps one
// stamped a moment ago; it warns of its clock once, and ClockSkew says
// how far ahead it is.
func TestLease_ClockAheadJudgesByTheStoresClock(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	month := spend.Month(time.Now())
	for _, r := range []store.Reservation{
		{Box: "alpha", Month: month, Amount: 30, At: time.Now()},                        // live
		{Box: "alpha", Month: month, Amount: 40, At: time.Now().Add(-10 * time.Minute)}, // stale
	} {
		if _, err := st.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var logs brokertest.Buffer
	m, err := spend.New(spend.Config{Store: st, StaleAfter: 2 * time.Minute, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Now:        func() time.Time { return time.Now().Add(10 * time.Minute) },
		StoreClock: func(context.Context) (time.Time, error) { return time.Now(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { m.Run(rctx); close(done) }()
	reserved := func() int64 {
		ts, err := st.Tallies(ctx, "alpha", month)
		if err != nil || len(ts) == 0 {
			t.Fatalf("Tallies = %v, %v", ts, err)
		}
		return ts[0].Reserved
	}
	// The stale one's release says the Meter has judged the leases; this
	// polls the store for it, for at most 10 s.
	for deadline := time.Now().Add(10 * time.Second); reserved() == 70 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if got := reserved(); got != 30 {
		t.Errorf("reserved after a Meter 10m ahead of its store judged the leases = %d, want 30 (the live one kept, the stale one released)", got)
	}
	if skew, ok := m.ClockSkew(); !ok || skew < 9*time.Minute || skew > 11*time.Minute {
		t.Errorf("ClockSkew() = %s, %v; want about 10m, true", skew, ok)
	}
	if n := strings.Count(logs.String(), "clock is far from the store's"); n != 1 {
		t.Errorf("%d warnings of the clock, want 1:\n%s", n, logs.String())
	}
}
