package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// testOverview seeds two boxes' audit entries, usage, budgets, secrets
// and reports, and reads each of store.Overview's answers back.
func testOverview(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	mustCreateBox(t, s, "gamma")
	hour := time.Date(2026, 10, 3, 14, 0, 0, 0, time.UTC)
	over := "This box's monthly budget of $1 for 2026-10 is spent: $1 charged and $0 held for calls in flight, and this call could cost up to $0.5."
	e := func(box string, min int, reason, msg string) store.AuditEntry {
		return store.AuditEntry{Box: box, At: hour.Add(time.Duration(min) * time.Minute), Method: "POST", Route: "/llm/anthropic/v1/messages",
			Capability: "inference", Status: map[bool]int{true: 200, false: 403}[reason == ""], Reason: reason, Message: msg, UpstreamStatus: 200}
	}
	entries := []store.AuditEntry{
		e("alpha", -90, "", ""), // before since
		e("alpha", 5, "", ""),
		e("alpha", 10, "Forbidden", over),
		e("alpha", 70, "Forbidden", over),
		e("alpha", 75, "declaration", "Add agent."),
		e("beta", 20, "", ""),
		e("", 30, "token", "no token"),
	}
	// The upstream's failures are counted apart from the broker's
	// refusals: unreachable, an answer the broker could not use, an
	// overload's 529 forwarded as it came.
	up := func(min int, reason string, status, upstream int) store.AuditEntry {
		u := e("gamma", min, reason, "")
		u.Status, u.UpstreamStatus = status, upstream
		return u
	}
	entries = append(entries, up(40, store.ReasonUpstreamFailed, 502, 0), up(41, store.ReasonUpstreamUnusable, 502, 200), up(42, "", 529, 529))
	act := e("alpha", 80, "", "")
	act.Capability, act.Route, act.Status = store.ActorAdmin, "/ui/boxes/{name}/rotate", 303
	entries = append(entries, act)
	wantErr(t, "AddAudit", s.AddAudit(ctx, entries), nil)

	want := []store.BoxActivity{
		{Box: "alpha", Requests: 4, Refusals: 3, LastServed: hour.Add(5 * time.Minute), LastOverBudget: hour.Add(70 * time.Minute)},
		{Box: "beta", Requests: 1, LastServed: hour.Add(20 * time.Minute)},
		{Box: "gamma", Requests: 3, Upstream: 3, LastServed: hour.Add(42 * time.Minute)},
	}
	answer(s.BoxActivity(ctx, hour)).is(t, "BoxActivity", want)

	wantH := []store.HourCount{{Hour: hour, Requests: 7, Refusals: 2, Upstream: 3}, {Hour: hour.Add(time.Hour), Requests: 2, Refusals: 2}}
	answer(s.AuditHours(ctx, "", hour)).is(t, "AuditHours(all)", wantH)
	answer(s.AuditHours(ctx, "beta", hour)).is(t, "AuditHours(beta)", []store.HourCount{{Hour: hour, Requests: 1}})

	wantG := []store.RefusalGroup{
		{Method: "POST", Route: "/llm/anthropic/v1/messages", Reason: "declaration", Message: "Add agent.", Count: 1, First: hour.Add(75 * time.Minute), Last: hour.Add(75 * time.Minute)},
		{Method: "POST", Route: "/llm/anthropic/v1/messages", Reason: "Forbidden", Message: over, Count: 2, First: hour.Add(10 * time.Minute), Last: hour.Add(70 * time.Minute)},
	}
	answer(s.RefusalGroups(ctx, "alpha", hour.Add(-3*time.Hour), 10)).is(t, "RefusalGroups", wantG)
	if groups, err := s.RefusalGroups(ctx, "alpha", hour, 1); err != nil || len(groups) != 1 {
		t.Errorf("RefusalGroups(limit 1) = %d groups, %v, want 1, nil", len(groups), err)
	}

	page := answer(s.AuditPage(ctx, "alpha", 1, 2)).must(t, "AuditPage")
	if len(page) != 2 || !sameTime(page[0].At, hour.Add(75*time.Minute)) || !sameTime(page[1].At, hour.Add(70*time.Minute)) {
		t.Errorf("AuditPage(alpha, 1, 2) = %+v, want the entries at +75m and +70m", page)
	}

	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1_000_000, UpdatedAt: hour}), nil)
	wantErr(t, "SetBudget(principal)", s.SetBudget(ctx, store.Budget{Box: "beta", Principal: "github:ann", Limit: 5, UpdatedAt: hour}), nil)
	wantErr(t, "Settle", s.Settle(ctx, store.Settlement{Box: "alpha", Month: "2026-10", Charge: 900_000,
		Usage: []store.Usage{{Box: "alpha", Month: "2026-10", PayerKind: "shared", Model: "m", Calls: 3, Cost: 900_000}}}), nil)
	wantErr(t, "Settle(other month)", s.Settle(ctx, store.Settlement{Box: "beta", Month: "2026-09", Charge: 7,
		Usage: []store.Usage{{Box: "beta", Month: "2026-09", PayerKind: "shared", Model: "m", Calls: 1, Cost: 7}}}), nil)
	wantM := []store.BoxMonth{{Box: "alpha", Measured: 900_000, Calls: 3, HasBudget: true, Limit: 1_000_000, Spent: 900_000}, {Box: "beta"}, {Box: "gamma"}}
	var months []store.BoxMonth
	for _, b := range answer(s.ListBoxPage(ctx, store.BoxQuery{Month: "2026-10", Limit: 10})).must(t, "ListBoxPage(2026-10)").Boxes {
		months = append(months, b.Month)
	}
	read(t, "ListBoxPage's months", wantM, months, nil)

	for _, n := range []string{"STRIPE", "GITHUB"} {
		wantErr(t, "SetSecret "+n, s.SetSecret(ctx, store.Secret{Box: "beta", Name: n, Host: "https://x.example", Sealed: []byte("sealed"), UpdatedAt: hour}), nil)
	}
	names := answer(s.SecretNames(ctx)).must(t, "SecretNames")
	if got := fmt.Sprint(names); got != "map[beta:[GITHUB STRIPE]]" {
		t.Errorf("SecretNames = %s, want map[beta:[GITHUB STRIPE]]", got)
	}

	wantErr(t, "SaveDeclaration", second(s.SaveDeclaration(ctx, "gamma", tokenOf("gamma"), []byte(`{"capabilities":[]}`), hour)), nil)
	docs := map[string]store.KeptDeclaration{}
	for _, b := range answer(s.ListBoxPage(ctx, store.BoxQuery{Limit: 10})).must(t, "ListBoxPage").Boxes {
		if b.Declaration != nil {
			docs[b.Box.Name] = *b.Declaration
		}
	}
	if len(docs) != 1 || string(docs["gamma"].Doc) != `{"capabilities":[]}` || !sameTime(docs["gamma"].At, hour) {
		t.Errorf("ListBoxPage's declarations = %q, want gamma's only", docs)
	}
}

// testFleetSpend settles calls on two boxes in two months and reads every
// box's usage and tallies of one month back at once.
func testFleetSpend(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "beta")
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "idle")
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Principal: "github:ann", Limit: 5_000_000, UpdatedAt: time.Now()}), nil)
	settle := func(box, month, principal string, charge int64, us ...store.Usage) {
		t.Helper()
		for i := range us {
			us[i].Box, us[i].Month, us[i].Principal = box, month, principal
		}
		wantErr(t, "Settle "+box+" "+month, s.Settle(ctx, store.Settlement{Box: box, Month: month, Principal: principal, Charge: charge, Usage: us}), nil)
	}
	settle("alpha", "2026-10", "", 300, store.Usage{PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 2, InputTokens: 10, OutputTokens: 20, Cost: 300})
	settle("alpha", "2026-10", "github:ann", 10_000_000, store.Usage{PayerKind: "visitor", Model: "claude-opus-5-5", Calls: 1, Unpriced: 1, InputTokens: 5})
	settle("beta", "2026-10", "", 40, store.Usage{PayerKind: "owner", Model: "claude-haiku-4-5", Calls: 1, CacheReadTokens: 7, Cost: 40})
	settle("beta", "2026-09", "", 9, store.Usage{PayerKind: "owner", Model: "claude-haiku-4-5", Calls: 1, Cost: 9})

	wantU := []store.Usage{
		{Box: "alpha", Month: "2026-10", PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 2, InputTokens: 10, OutputTokens: 20, Cost: 300},
		{Box: "alpha", Month: "2026-10", PayerKind: "visitor", Principal: "github:ann", Model: "claude-opus-5-5", Calls: 1, Unpriced: 1, InputTokens: 5},
		{Box: "beta", Month: "2026-10", PayerKind: "owner", Model: "claude-haiku-4-5", Calls: 1, CacheReadTokens: 7, Cost: 40},
	}
	answer(s.FleetUsage(ctx, "2026-10")).is(t, "FleetUsage", wantU)
	wantT := []store.Tally{
		{Box: "alpha", Month: "2026-10", Spent: 10_000_300},
		{Box: "alpha", Principal: "github:ann", Month: "2026-10", Spent: 10_000_000},
		{Box: "beta", Month: "2026-10", Spent: 40},
	}
	answer(s.FleetTallies(ctx, "2026-10")).is(t, "FleetTallies", wantT)
	wantTotal := store.MonthTotal{Usage: store.Usage{Calls: 4, Unpriced: 1, InputTokens: 15, OutputTokens: 20, CacheReadTokens: 7, Cost: 340}, Charged: 10_000_340}
	answer(s.FleetTotal(ctx, "2026-10")).is(t, "FleetTotal", wantTotal)
	answer(s.FleetTotal(ctx, "2026-11")).is(t, "FleetTotal(2026-11)", store.MonthTotal{})
	answer(s.FleetUsage(ctx, "2026-11")).none(t, "FleetUsage(2026-11)")
	answer(s.FleetTallies(ctx, "2026-11")).none(t, "FleetTallies(2026-11)")
}
