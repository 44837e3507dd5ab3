package storetest

import (
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// testAuditCosts stores entries with bytes and costs (some past what 32
// bits hold), reads them back whole through ListAudit and AuditPage, and
// sums them per UTC day with AuditDays: a day's bounds are exact, other
// boxes, earlier entries and entries with no cost are left out.
func testAuditCosts(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	day := time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC)
	e := func(box string, at time.Time, bytes, cost int64) store.AuditEntry {
		return store.AuditEntry{Box: box, At: at, Method: "POST", Route: "/llm/anthropic/v1/messages", Capability: "inference",
			Words: []string{"agent"}, Status: 200, Duration: time.Millisecond, UpstreamStatus: 200, Bytes: bytes, Cost: cost}
	}
	entries := []store.AuditEntry{
		e("alpha", day.Add(-time.Microsecond), 10, 1_000_000),    // the day before since: left out
		e("alpha", day, 5_000_000_000, 7_000_000_000),            // first instant of the day
		e("alpha", day.Add(24*time.Hour-time.Microsecond), 3, 5), // last instant of the same day
		e("alpha", day.Add(24*time.Hour), 0, 0),                  // next day, no cost: left out
		e("alpha", day.Add(26*time.Hour), 99, 250),               // next day
		e("beta", day.Add(time.Hour), 1, 1_000),                  // another box
	}
	wantErr(t, "AddAudit", s.AddAudit(ctx, entries), nil)

	got := answer(s.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 10})).must(t, "ListAudit(alpha)")
	if len(got) != 5 {
		t.Fatalf("ListAudit = %d entries, want 5", len(got))
	}
	for i, g := range got {
		w := entries[4-i]
		if g.Bytes != w.Bytes || g.Cost != w.Cost {
			t.Errorf("ListAudit entry at %v: bytes %d, cost %d; want %d, %d", w.At, g.Bytes, g.Cost, w.Bytes, w.Cost)
		}
	}
	page := answer(s.AuditPage(ctx, "alpha", 3, 10)).must(t, "AuditPage")
	if len(page) != 2 || page[0].Bytes != 5_000_000_000 || page[0].Cost != 7_000_000_000 || page[1].Cost != 1_000_000 {
		t.Errorf("AuditPage(alpha, 3, 10) = %+v, want the entries at the day's start and before, bytes and cost kept", page)
	}

	days := answer(s.AuditDays(ctx, "alpha", day)).must(t, "AuditDays")
	want := []store.DayCost{
		{Day: day, Cost: 7_000_000_005, Calls: 2},
		{Day: day.Add(24 * time.Hour), Cost: 250, Calls: 1},
	}
	same(t, "AuditDays(alpha)", want, days)
	for _, d := range days {
		if d.Day.Location() != time.UTC {
			t.Errorf("AuditDays day %v in %v, want UTC", d.Day, d.Day.Location())
		}
	}
	answer(s.AuditDays(ctx, "nobox", day)).none(t, "AuditDays(nobox)")
}
