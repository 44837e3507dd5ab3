package server_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// TestReplicas_ClockAheadDoesNotReleaseLiveReservations: on PostgreSQL,
// a replica whose clock runs ahead of the store's by more than the
// reservation lease judges leases by the store's clock: it releases a
// reservation no one renewed within the lease, and not another
// replica's live one stamped a moment ago. It warns once of its clock,
// and its /readyz shows how far ahead it is.
func TestReplicas_ClockAheadDoesNotReleaseLiveReservations(t *testing.T) {
	dsn := postgrestest.Schema(t)
	ctx := context.Background()
	key := brokertest.MasterKey(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("postgres.Open = %v", err)
		}
		return st
	}
	const lease = 2 * time.Minute
	ahead := func() time.Time { return time.Now().Add(10 * time.Minute) }
	var logs brokertest.Buffer
	cfg := server.Config{Store: dsn, MasterKey: key, DataDir: t.TempDir(), ReservationLease: lease, StoreDeadline: time.Second}
	fast, err := server.New(ctx, cfg, server.Options{Store: open(), SpendNow: ahead,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { fast.Close(); fast.Store.Close() }()

	// Another replica's reservation, stamped now by the store's clock
	// (this machine's), and one nobody renewed for ten minutes.
	st := fast.Store
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	month := spend.Month(time.Now())
	if _, err := st.Reserve(ctx, store.Reservation{Box: "alpha", Month: month, Amount: 30, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, store.Reservation{Box: "alpha", Month: month, Amount: 40, At: time.Now().Add(-10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	reserved := func() int64 {
		ts, err := st.Tallies(ctx, "alpha", month)
		if err != nil || len(ts) == 0 {
			t.Fatalf("Tallies = %v, %v", ts, err)
		}
		return ts[0].Reserved
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { fast.Meter.Run(rctx); close(done) }()
	// The stale one's release says the fast replica has judged the
	// leases; this polls the store for it, for at most 10 s.
	for deadline := time.Now().Add(10 * time.Second); reserved() == 70 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if got := reserved(); got != 30 {
		t.Errorf("reserved after a replica 10m ahead judged the leases (lease %s) = %d, want 30: the live reservation kept, the stale one released", lease, got)
	}

	if n := strings.Count(logs.String(), "clock is far from the store's"); n != 1 {
		t.Errorf("the replica 10m ahead logged %d warnings of its clock, want 1:\n%s", n, logs.String())
	}
	out, _ := fast.Ready(ctx)
	if c, _ := out["clock"].(string); !strings.Contains(c, "ahead of the store's") {
		t.Errorf("Ready() = %v, want clock saying it is ahead of the store's", out)
	}
	t.Logf("readyz: %v", out)
}
