package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// testRenewReservations: a renewed reservation is not stale; one not
// renewed is; renewing one released already is no error.
func testRenewReservations(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const m = "2026-10"
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 100, UpdatedAt: at(1)}), nil)
	live := answer(s.Reserve(ctx, store.Reservation{Box: "alpha", Month: m, Amount: 30, At: at(0)})).must(t, "Reserve(live)")
	crashed := answer(s.Reserve(ctx, store.Reservation{Box: "alpha", Month: m, Amount: 40, At: at(0)})).must(t, "Reserve(crashed)")
	wantErr(t, "RenewReservations(live)", s.RenewReservations(ctx, []int64{live}, at(20)), nil)
	if n, err := releaseBefore(ctx, s, at(10)); n != 1 || err != nil {
		t.Fatalf("releaseBefore(at 10) = %d, %v; want the one not renewed", n, err)
	}
	same(t, fmt.Sprintf("Tallies after the lease of %d ran out", crashed), []store.Tally{{Box: "alpha", Month: m, Reserved: 30}}, tallies(t, s, "alpha", m))
	wantErr(t, "RenewReservations(released and live)", s.RenewReservations(ctx, []int64{crashed, live}, at(30)), nil)
	wantErr(t, "RenewReservations(none)", s.RenewReservations(ctx, nil, at(30)), nil)
	answer(releaseBefore(ctx, s, at(25))).is(t, "releaseBefore(at 25) after renewing to 30", 0)
}

// testReservationOfAReplicaBehindIsKept: of two replicas of one store,
// one whose clock is an hour behind (as one whose clock stepped back
// between two measurements of the store's) and one on the store's time,
// the reservation the one behind makes, and renews, is stamped by the
// store's clock: the other keeps it while its lease runs, and releases
// one whose lease ran out by the store's clock.
func testReservationOfAReplicaBehindIsKept(t *testing.T, behind, on store.Store) {
	ctx := t.Context()
	const lease = 2 * time.Minute
	mustCreateBox(t, behind, "alpha")
	m := time.Now().UTC().Format("2006-01")
	wantErr(t, "SetBudget", behind.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 100, UpdatedAt: at(1)}), nil)
	wantErr(t, "SetWindowBudget", behind.SetWindowBudget(ctx, store.Budget{Box: "alpha", Window: "day", Limit: 100, UpdatedAt: at(1)}), nil)
	live := answer(behind.Reserve(ctx, store.Reservation{Box: "alpha", Month: m, Amount: 30})).must(t, "Reserve(by the replica behind)")
	must(t, "Reserve(lease run out)", second(on.Reserve(ctx, store.Reservation{Box: "alpha", Month: m, Amount: 40, At: time.Now().Add(-10 * time.Minute)})))
	answer(on.ReleaseExpired(ctx, lease)).is(t, "ReleaseExpired by the replica on the store's time (want only the lease run out)", 1)
	same(t, "Tallies (want the live reservation held)", []store.Tally{{Box: "alpha", Month: m, Reserved: 30}}, tallies(t, on, "alpha", m))
	wantErr(t, "RenewReservations(by the replica behind)", behind.RenewReservations(ctx, []int64{live}, time.Time{}), nil)
	answer(on.ReleaseExpired(ctx, lease)).is(t, "ReleaseExpired after the replica behind renewed", 0)
	answer(behind.ReleaseExpired(ctx, lease)).is(t, "ReleaseExpired by the replica behind", 0)
	same(t, "Tallies after both judged the leases (want the live reservation held)", []store.Tally{{Box: "alpha", Month: m, Reserved: 30}}, tallies(t, on, "alpha", m))
	// Its window hold is in the bucket of the replica's own clock, as its
	// settlement's charge will be.
	ts := answer(behind.WindowTallies(ctx, "alpha", time.Now().Add(-time.Hour))).must(t, "WindowTallies")
	if len(ts) != 1 || ts[0].Reserved != 30 {
		t.Errorf("WindowTallies of the day by the replica's clock = %+v, want 30 held", ts)
	}
	// SQLite's clock reads whole milliseconds: a lease of 0 from the
	// millisecond of the renewal would keep it.
	time.Sleep(2 * time.Millisecond)
	answer(on.ReleaseExpired(ctx, 0)).is(t, "ReleaseExpired(lease 0)", 1)
}

// releaseBefore releases the reservations s holds stamped before before:
// ReleaseExpired with the lease that ends there by this machine's clock,
// which is the database's within the seconds between the times a case
// stamps.
func releaseBefore(ctx context.Context, s store.Store, before time.Time) (int, error) {
	return s.ReleaseExpired(ctx, time.Since(before))
}
