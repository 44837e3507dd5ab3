package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

func testRateLimits(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	wantErr(t, "SetRateLimit(nobox)", s.SetRateLimit(ctx, store.RateLimit{Box: "nobox", RPM: 1, UpdatedAt: at(1)}), store.ErrNotFound)
	c := concept[store.RateLimit]{set: "SetRateLimit", del: "DeleteRateLimit", key: func(l store.RateLimit) string { return l.Box + ", " + l.Principal },
		write: s.SetRateLimit, remove: func(ctx context.Context, l store.RateLimit) error { return s.DeleteRateLimit(ctx, l.Box, l.Principal) }}
	ann := store.RateLimit{Box: "alpha", Principal: "github:ann", InputTPM: 10, UpdatedAt: at(1)}
	c.sets(t, ann, store.RateLimit{Box: "alpha", RPM: 5, UpdatedAt: at(1)})
	c.replaces(t, store.RateLimit{Box: "alpha", RPM: 6, OutputTPM: 7, UpdatedAt: at(2)})
	answer(s.ListRateLimits(ctx, "")).is(t, "ListRateLimits", []store.RateLimit{
		{Box: "alpha", RPM: 6, OutputTPM: 7, UpdatedAt: at(2).UTC().Truncate(time.Microsecond)},
		{Box: "alpha", Principal: "github:ann", InputTPM: 10, UpdatedAt: at(1).UTC().Truncate(time.Microsecond)},
	})
	c.removes(t, ann)

	// Counts are stamped and judged fresh by the store's clock: r1's,
	// written with its own clock an hour behind, is fresh to r2.
	behind := time.Now().Add(-time.Hour)
	must(t, "ExchangeRates(r1)", second(s.ExchangeRates(ctx, "r1", []store.RateCount{{Key: "alpha", Requests: 3, InputTokens: 30, At: behind}}, time.Minute)))
	others := answer(s.ExchangeRates(ctx, "r2", []store.RateCount{{Key: "alpha", Requests: 1, At: behind}}, 2*time.Second)).must(t, "ExchangeRates(r2)")
	if len(others) != 1 {
		t.Fatalf("ExchangeRates(r2) = %+v, want r1's count", others)
	}
	if d := time.Since(others[0].At); others[0].At.Location() != time.UTC || d > time.Minute || d < -time.Minute {
		t.Errorf("ExchangeRates(r2): r1's count at %v, want the store's time of writing, not r1's clock", others[0].At)
	}
	others[0].At = time.Time{}
	same(t, "ExchangeRates(r2)", []store.RateCount{{Key: "alpha", Replica: "r1", Requests: 3, InputTokens: 30}}, others)
	// A count written longer ago than within is not returned.
	time.Sleep(10 * time.Millisecond)
	if others, _ := s.ExchangeRates(ctx, "r2", nil, time.Millisecond); len(others) != 0 {
		t.Errorf("ExchangeRates(within 1ms, 10ms after the last write) = %+v, want none", others)
	}
}

func testAlerts(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	a := store.BudgetAlert{Box: "alpha", Window: "day", Period: "2026-10-05", Threshold: 80, Limit: 100, Spent: 85, At: at(1).UTC().Truncate(time.Microsecond)}
	for i, want := range []bool{true, false} {
		answer(s.MarkAlert(ctx, a)).is(t, fmt.Sprintf("MarkAlert #%d", i+1), want)
	}
	b := a
	b.Threshold, b.At = 100, at(2).UTC().Truncate(time.Microsecond)
	answer(s.MarkAlert(ctx, b)).is(t, "MarkAlert(100%)", true)
	answer(s.ListAlerts(ctx, "alpha", 10)).is(t, "ListAlerts", []store.BudgetAlert{b, a})
}
