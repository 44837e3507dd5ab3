package storetest

import (
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// testPromptCache settles prompt-cache use of two boxes on two pool
// entries over two months and more than a day of hours, and reads back
// the month sums and the last hours' sums, each by box, payer kind and
// entry: a box moved to another entry shows the new entry's own, colder
// ratio beside the old one's.
func testPromptCache(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	now := time.Date(2026, 11, 2, 10, 30, 0, 0, time.UTC)
	settle := func(box, entry string, at time.Time, input, write, read int64) {
		t.Helper()
		c := store.CacheUsage{Box: box, PayerKind: "pool", Entry: entry, Hour: at.Truncate(time.Hour),
			Calls: 1, InputTokens: input, CacheWriteTokens: write, CacheReadTokens: read}
		wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Box: box, Month: at.Format("2006-01"), Cache: []store.CacheUsage{c}}), nil)
	}
	// alpha hit its cache on entry "a" in October and this morning, then
	// moved to entry "b", where it writes the cache again.
	settle("alpha", "a", now.AddDate(0, -1, 0), 10, 100, 900)
	settle("alpha", "a", now.Add(-30*time.Hour), 10, 0, 990) // this month, not the last day
	settle("alpha", "a", now.Add(-2*time.Hour), 10, 0, 990)
	settle("alpha", "b", now.Add(-1*time.Hour), 10, 990, 0)
	settle("alpha", "b", now, 10, 0, 990)
	settle("alpha", "b", now, 10, 990, 0)
	// beta pays with its owner's credential: no entry.
	own := store.CacheUsage{Box: "beta", PayerKind: "owner", Hour: now.Truncate(time.Hour), Calls: 2, InputTokens: 500, CacheReadTokens: 500}
	wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Box: "beta", Month: "2026-11", Cache: []store.CacheUsage{own}}), nil)
	// A settlement older than the ring (spooled a while) counts in its
	// month but takes no newer hour's slot.
	settle("alpha", "a", now.Add(-26*time.Hour), 1, 2, 3) // the slot of now-2h

	got, err := s.ListCache(ctx, "alpha", "2026-11")
	wantErr(t, "ListCache", err, nil)
	want := []store.CacheUsage{
		{Box: "alpha", PayerKind: "pool", Entry: "a", Calls: 3, InputTokens: 21, CacheWriteTokens: 2, CacheReadTokens: 1983},
		{Box: "alpha", PayerKind: "pool", Entry: "b", Calls: 3, InputTokens: 30, CacheWriteTokens: 1980, CacheReadTokens: 990},
	}
	same(t, "ListCache(alpha, 2026-11)", want, got)
	got, err = s.ListCache(ctx, "alpha", "2026-10")
	wantErr(t, "ListCache", err, nil)
	want = []store.CacheUsage{{Box: "alpha", PayerKind: "pool", Entry: "a", Calls: 1, InputTokens: 10, CacheWriteTokens: 100, CacheReadTokens: 900}}
	same(t, "ListCache(alpha, 2026-10)", want, got)

	day := []store.CacheUsage{
		{Box: "alpha", PayerKind: "pool", Entry: "a", Calls: 1, InputTokens: 10, CacheReadTokens: 990},
		{Box: "alpha", PayerKind: "pool", Entry: "b", Calls: 3, InputTokens: 30, CacheWriteTokens: 1980, CacheReadTokens: 990},
	}
	got, err = s.ListCacheSince(ctx, "alpha", now.Add(-24*time.Hour))
	wantErr(t, "ListCacheSince", err, nil)
	same(t, "ListCacheSince(alpha, 24h)", day, got)
	if a, b := got[0].HitRatio(), got[1].HitRatio(); a < 0.99 || b > 0.34 {
		t.Errorf("HitRatio(a, b) = %.2f, %.2f; want the old entry's above 0.99 and the new one's below 0.34", a, b)
	}

	// The fleet: every box.
	got, err = s.ListCacheSince(ctx, "", now.Add(-time.Hour))
	wantErr(t, "ListCacheSince", err, nil)
	wantAll := []store.CacheUsage{
		{Box: "alpha", PayerKind: "pool", Entry: "b", Calls: 3, InputTokens: 30, CacheWriteTokens: 1980, CacheReadTokens: 990},
		{Box: "beta", PayerKind: "owner", Calls: 2, InputTokens: 500, CacheReadTokens: 500},
	}
	same(t, "ListCacheSince(all, 1h)", wantAll, got)

	// A day on, the same slot holds the new hour alone.
	settle("alpha", "b", now.Add(24*time.Hour), 7, 0, 0)
	got, err = s.ListCacheSince(ctx, "alpha", now)
	wantErr(t, "ListCacheSince", err, nil)
	want = []store.CacheUsage{{Box: "alpha", PayerKind: "pool", Entry: "b", Calls: 1, InputTokens: 7}}
	same(t, "ListCacheSince(alpha) a day on", want, got)

	// A removed box's use goes with it.
	wantErr(t, "DeleteBox", s.DeleteBox(ctx, "beta"), nil)
	got, err = s.ListCache(ctx, "beta", "2026-11")
	wantErr(t, "ListCache", err, nil)
	if len(got) != 0 {
		t.Errorf("ListCache(removed beta) = %v, want none", got)
	}
}

// testPromptCacheReplicaAhead: a replica whose clock runs a day ahead
// settles prompt-cache use stamped with its hour. Keyed by that hour, it
// took the slot of the hour the others are in, and dropped what they
// added to it after; the store keeps a row's hour at most the database's,
// so the hour the others are in holds every call.
func testPromptCacheReplicaAhead(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	now := time.Now().UTC()
	settle := func(at time.Time) {
		t.Helper()
		c := store.CacheUsage{Box: "alpha", PayerKind: "pool", Entry: "a", Hour: at.Truncate(time.Hour), Calls: 1, InputTokens: 10}
		wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Box: "alpha", Month: now.Format("2006-01"), Cache: []store.CacheUsage{c}}), nil)
	}
	settle(now)
	settle(now.Add(24 * time.Hour)) // the replica a day ahead
	settle(now)
	got, err := s.ListCacheSince(ctx, "alpha", now)
	wantErr(t, "ListCacheSince", err, nil)
	want := []store.CacheUsage{{Box: "alpha", PayerKind: "pool", Entry: "a", Calls: 3, InputTokens: 30}}
	same(t, "ListCacheSince(alpha, this hour)", want, got)
	// In a batch too (a spool applied), the day-ahead hour goes to the
	// database's, not over the hour the others are in.
	c := func(at time.Time) store.Settlement {
		return store.Settlement{Box: "alpha", Month: now.Format("2006-01"), Cache: []store.CacheUsage{{Box: "alpha", PayerKind: "pool", Entry: "a", Hour: at.Truncate(time.Hour), Calls: 1, InputTokens: 10}}}
	}
	applied, err := s.ApplySpooled(ctx, "ahead-batch", []store.Settlement{c(now), c(now.Add(24 * time.Hour))}, nil)
	if err != nil || !applied {
		t.Fatalf("ApplySpooled = %v, %v", applied, err)
	}
	got, err = s.ListCacheSince(ctx, "alpha", now)
	wantErr(t, "ListCacheSince", err, nil)
	want[0].Calls, want[0].InputTokens = 5, 50
	same(t, "ListCacheSince(alpha, this hour) after a batch", want, got)
	// The month a call is counted in is the database's hour's too.
	ahead := now.AddDate(0, 2, 0)
	settle(ahead)
	answer(s.ListCache(ctx, "alpha", ahead.Format("2006-01"))).none(t, "ListCache(alpha) of a month the database is not in")
}
