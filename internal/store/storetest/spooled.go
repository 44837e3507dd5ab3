package storetest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// testApplySpooledOverflowIsRejected: a batch whose usage would carry a
// kept sum past the column's range is refused with store.ErrRejected (a
// batch the store will never take, not an outage), applies nothing, and
// leaves its key unapplied; the store takes the next batch.
func testApplySpooledOverflowIsRejected(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	u := func(n int64) []store.Usage {
		return []store.Usage{{Box: "alpha", Month: "2026-10", PayerKind: "shared", Model: "m", Calls: 1, InputTokens: n}}
	}
	wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Box: "alpha", Month: "2026-10", Charge: 1, Usage: u(math.MaxInt64 - 1)}), nil)
	applied, err := s.ApplySpooled(ctx, "over", []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 5, Usage: u(2)}}, nil)
	if !errors.Is(err, store.ErrRejected) || applied {
		t.Fatalf("ApplySpooled(past the column's range) = %v, %v, want false, store.ErrRejected", applied, err)
	}
	if errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ApplySpooled(past the column's range) = %v, which is also store.ErrUnavailable", err)
	}
	same(t, "Tallies after the refused batch", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 1}}, tallies(t, s, "alpha", "2026-10"))
	answer(s.ApplySpooled(ctx, "next", []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 2}}, nil)).is(t, "ApplySpooled(the next batch) (want applied)", true)
	// The refused key was not kept as applied: fixed, the batch applies.
	answer(s.ApplySpooled(ctx, "over", []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 5}}, nil)).is(t, "ApplySpooled(the refused key, fixed) (want applied)", true)
	same(t, "Tallies at the end", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 8}}, tallies(t, s, "alpha", "2026-10"))
}

// testApplySpooledOnce: a spooled batch applies its settlements and
// audit entries once, however often it is replayed; a settlement of a
// removed box is dropped, not an error that would hold the spool.
func testApplySpooledOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 10_000_000, UpdatedAt: at(1)}), nil)
	id := answer(s.Reserve(ctx, store.Reservation{Box: "alpha", Month: "2026-10", Amount: 500_000, At: at(2)})).held(t, "Reserve")
	settle := []store.Settlement{
		{Reservation: id, Box: "alpha", Month: "2026-10", Charge: 1_000,
			Usage: []store.Usage{{Box: "alpha", Month: "2026-10", PayerKind: "shared", Model: "m", Calls: 1, InputTokens: 10, Cost: 1_000}}},
		{Box: "gone", Month: "2026-10", Charge: 7},
	}
	audit := []store.AuditEntry{{Box: "alpha", At: at(3), Method: "POST", Route: "/llm/anthropic/v1/messages", Capability: "inference", Words: []string{"agent"}, Status: 200}}
	for i := range 3 {
		applied := answer(s.ApplySpooled(ctx, "k1", settle, audit)).must(t, fmt.Sprintf("ApplySpooled #%d", i+1))
		if applied != (i == 0) {
			t.Errorf("ApplySpooled #%d applied = %v, want %v", i+1, applied, i == 0)
		}
	}
	same(t, "Tallies after three replays (want spent 1000 and nothing reserved)", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 1_000}}, tallies(t, s, "alpha", "2026-10"))
	answer(s.ListUsage(ctx, "alpha", "2026-10")).is(t, "ListUsage after three replays (want one call)", settle[0].Usage)
	entries, err := s.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 10})
	if err != nil || len(entries) != 1 {
		t.Errorf("ListAudit after three replays = %d entries, %v, want 1", len(entries), err)
	}
	// Another key is another batch.
	answer(s.ApplySpooled(ctx, "k2", settle[:1], nil)).is(t, "ApplySpooled(k2) (want applied)", true)
	same(t, "Tallies after k2", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 2_000}}, tallies(t, s, "alpha", "2026-10"))
}

// testApplySpooledOnceAfterAClockJump: the key of a batch applied is kept
// by the database's clock, not the replica's: a replica whose clock jumps
// past store.SpooledKeep ahead applies another batch without forgetting
// the first, and the first, replayed then, is not charged again.
func testApplySpooledOnceAfterAClockJump(t *testing.T, s store.Store, c *clock) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	k1 := []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 1_000}}
	answer(s.ApplySpooled(ctx, "k1", k1, nil)).is(t, "ApplySpooled(k1) (want applied)", true)
	c.jump(store.SpooledKeep + 24*time.Hour)
	answer(s.ApplySpooled(ctx, "k2", []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 10}}, nil)).
		is(t, "ApplySpooled(k2) once the replica's clock jumped 31 days ahead (want applied)", true)
	answer(s.ApplySpooled(ctx, "k1", k1, nil)).is(t, "ApplySpooled(k1) replayed then (want already applied)", false)
	same(t, "Tallies (want k1 charged once)", []store.Tally{{Box: "alpha", Month: "2026-10", Spent: 1_010}}, tallies(t, s, "alpha", "2026-10"))
}

// testApplySpooledSumsAsOneByOne: a batch of many settlements across a
// few boxes, principals, models, prompt-cache entries and hours, some
// reserved and one of a removed box, leaves exactly the tallies, usage
// and prompt-cache sums and hours that settling them one by one leaves.
// Each way runs in a world of its own boxes ("one-a" and "many-a", …)
// from the same start, including a ring of hours already holding older
// and newer hours than the batch's.
func testApplySpooledSumsAsOneByOne(t *testing.T, s store.Store) {
	ctx := t.Context()
	const m1, m2 = "2026-10", "2026-11"
	t0 := time.Date(2026, 10, 20, 14, 0, 0, 0, time.UTC)
	hours := []time.Time{t0.Add(-24 * time.Hour), t0, t0.Add(time.Hour), t0.Add(-23 * time.Hour), t0.Add(25 * time.Hour)}
	boxes := []string{"a", "b", "gone"}
	principals := []string{"", "github:ann", "github:bob"}
	models := []string{"haiku", "sonnet"}
	entries := []string{"e1", "e2", "e3"}
	const calls = 60
	settlements := make(map[string][]store.Settlement)
	for _, world := range []string{"one-", "many-"} {
		for _, b := range boxes {
			mustCreateBox(t, s, world+b)
		}
		wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: world + "a", Limit: 1_000_000, UpdatedAt: at(1)}), nil)
		wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: world + "b", Principal: "github:ann", Limit: 1_000_000, UpdatedAt: at(1)}), nil)
		wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: world + "gone", Limit: 1_000_000, UpdatedAt: at(1)}), nil)
		// The ring before: e1's slot of t0 holds the hour before (a day
		// older), e2's holds t0, e3's slot of t0+1h holds a day later.
		for _, c := range []store.CacheUsage{
			{Box: world + "a", PayerKind: "shared", Entry: "e1", Hour: t0.Add(-24 * time.Hour), Calls: 1, InputTokens: 3},
			{Box: world + "a", PayerKind: "shared", Entry: "e2", Hour: t0, Calls: 2, InputTokens: 5},
			{Box: world + "b", PayerKind: "shared", Entry: "e3", Hour: t0.Add(25 * time.Hour), Calls: 4, CacheReadTokens: 7},
		} {
			wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Box: c.Box, Month: m1, Cache: []store.CacheUsage{c}}), nil)
		}
		// A reservation never settled stays held either way.
		must(t, "Reserve", second(reserve(t, s, world+"a", "", m1, 11)))
		for i := range calls {
			box := world + boxes[i%len(boxes)]
			if i%7 == 6 {
				box = world + "a"
			}
			principal := principals[i/2%len(principals)]
			month := m1
			if i%5 == 4 {
				month = m2
			}
			payer := "shared"
			if principal != "" {
				payer = "principal"
			}
			st := store.Settlement{Box: box, Principal: principal, Month: month, Charge: int64(100 + i)}
			if i%3 == 0 {
				id, err := reserve(t, s, box, principal, month, int64(200+i))
				must(t, fmt.Sprintf("Reserve #%d", i), err)
				st.Reservation = id
			}
			if i%4 != 3 {
				st.Usage = []store.Usage{{Box: box, Month: month, PayerKind: payer, Principal: principal, Model: models[i/3%len(models)],
					Calls: 1, Unpriced: int64(i % 2), Unmeasured: int64(i / 2 % 2), InputTokens: int64(10 + i), OutputTokens: int64(i),
					CacheWriteTokens: int64(i % 5), CacheReadTokens: int64(i % 9), Cost: int64(100 + i)}}
			}
			if i%6 != 5 {
				for j := range 1 + i%2 {
					st.Cache = append(st.Cache, store.CacheUsage{Box: box, PayerKind: payer, Entry: entries[(i+j)%len(entries)],
						Hour: hours[(i*7+j)%len(hours)].Add(time.Duration(i) * time.Minute % time.Hour), Calls: 1,
						InputTokens: int64(i), CacheWriteTokens: int64(j), CacheReadTokens: int64(1000 + i)})
				}
			}
			settlements[world] = append(settlements[world], st)
		}
		wantErr(t, "DeleteBox", s.DeleteBox(ctx, world+"gone"), nil)
	}
	for i, st := range settlements["one-"] {
		err := s.Settle(ctx, st)
		if st.Box == "one-gone" {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Settle #%d of a removed box = %v, want store.ErrNotFound", i, err)
			}
			continue
		}
		wantErr(t, fmt.Sprintf("Settle #%d", i), err, nil)
	}
	if applied, err := s.ApplySpooled(ctx, "many", settlements["many-"], nil); err != nil || !applied {
		t.Fatalf("ApplySpooled = %v, %v, want applied", applied, err)
	}
	// What each world holds, its boxes named as in the other.
	held := func(world string) string {
		var out []string
		add := func(what string, v any, err error) {
			t.Helper()
			must(t, what, err)
			out = append(out, fmt.Sprintf("%s: %+v", what, v))
		}
		for _, b := range []string{"a", "b"} {
			for _, month := range []string{m1, m2} {
				ts, err := s.Tallies(ctx, world+b, month)
				add("Tallies "+b+" "+month, ts, err)
				us, err := s.ListUsage(ctx, world+b, month)
				add("ListUsage "+b+" "+month, us, err)
				cs, err := s.ListCache(ctx, world+b, month)
				add("ListCache "+b+" "+month, cs, err)
			}
			// Each since between two of the batch's hours.
			for _, h := range []int{-25, -24, -23, -22, 0, 1, 2, 25, 26} {
				cs, err := s.ListCacheSince(ctx, world+b, t0.Add(time.Duration(h)*time.Hour))
				add(fmt.Sprintf("ListCacheSince %s t0%+dh", b, h), cs, err)
			}
		}
		return strings.ReplaceAll(strings.Join(out, "\n"), world, "")
	}
	one, many := held("one-"), held("many-")
	if one != many {
		t.Errorf("a batch left other sums than one by one (-one +many):\n%s", diff(strings.Split(one, "\n"), strings.Split(many, "\n")))
	}
	// Both ways released every reservation settled, and only those.
	for _, b := range []string{"many-a", "many-b"} {
		for _, month := range []string{m1, m2} {
			for _, tl := range tallies(t, s, b, month) {
				want := int64(0)
				if b == "many-a" && tl.Principal == "" && month == m1 {
					want = 11
				}
				if tl.Reserved != want {
					t.Errorf("after the batch, tally %+v, want %d reserved", tl, want)
				}
			}
		}
	}
	// The worlds are not trivially alike: the batch charged and used.
	if !strings.Contains(one, "Spent:") || !strings.Contains(one, "CacheReadTokens:1") {
		t.Errorf("one by one held little: %s", one)
	}
}
