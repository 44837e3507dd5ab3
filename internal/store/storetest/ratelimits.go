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

	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	must(t, "ExchangeRates(r1)", second(s.ExchangeRates(ctx, "r1", []store.RateCount{{Key: "alpha", Requests: 3, InputTokens: 30, At: now}}, now.Add(-time.Minute))))
	answer(s.ExchangeRates(ctx, "r2", []store.RateCount{{Key: "alpha", Requests: 1, At: now}}, now.Add(-time.Minute))).is(t, "ExchangeRates(r2)", []store.RateCount{{Key: "alpha", Replica: "r1", Requests: 3, InputTokens: 30, At: now}})
	if others, _ := s.ExchangeRates(ctx, "r2", nil, now.Add(time.Second)); len(others) != 0 {
		t.Errorf("ExchangeRates(since after) = %+v, want none", others)
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
