package storetest

import (
	"fmt"
	"testing"

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
	if n, err := s.ReleaseStale(ctx, at(10)); n != 1 || err != nil {
		t.Fatalf("ReleaseStale(at 10) = %d, %v; want the one not renewed", n, err)
	}
	same(t, fmt.Sprintf("Tallies after the lease of %d ran out", crashed), []store.Tally{{Box: "alpha", Month: m, Reserved: 30}}, tallies(t, s, "alpha", m))
	wantErr(t, "RenewReservations(released and live)", s.RenewReservations(ctx, []int64{crashed, live}, at(30)), nil)
	wantErr(t, "RenewReservations(none)", s.RenewReservations(ctx, nil, at(30)), nil)
	answer(s.ReleaseStale(ctx, at(25))).is(t, "ReleaseStale(at 25) after renewing to 30", 0)
}
