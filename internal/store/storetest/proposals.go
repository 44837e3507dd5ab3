package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// proposal is a pending rule proposal of box, keyed key, opened at at(n).
func proposal(box, id, key string, n int) store.Proposal {
	return store.Proposal{ID: id, Attempt: store.Attempt{Box: box, Kind: store.ProposalRule, Secret: "GITHUB", Method: "POST", Path: "/repos/acme/x/issues",
		Host: "https://api.github.com", Reason: "outside its rules"}, Key: key, CreatedAt: at(n), ExpiresAt: at(n + 3600)}
}

// openProposal opens p as a request of its box admitted with the box's
// token (tokenOf) would.
func openProposal(ctx context.Context, s store.Store, p store.Proposal, max int) (store.Proposal, error) {
	return s.OpenProposal(ctx, p, tokenOf(p.Box), max)
}

// testProposals: a proposal opens pending, identical ones merge into a
// count, a box holds at most max pending, an unanswered one expires and
// frees its place, a decision is made once, approvals in force are
// listed until they end, asks are set and cleared, and all of it writes
// no change and goes with its box.
func testProposals(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	seq := lastChange(t, s)

	wantErr(t, "OpenProposal(no box)", second(openProposal(ctx, s, proposal("nobody", "p-0", "k0", 1), 3)), store.ErrNotFound)
	p := answer(openProposal(ctx, s, proposal("alpha", "p-1", "k1", 1), 3)).must(t, "OpenProposal")
	want := proposal("alpha", "p-1", "k1", 1)
	want.Count, want.State, want.UpdatedAt = 1, store.ProposalPending, at(1)
	same(t, "OpenProposal", want, p)
	again := proposal("alpha", "p-other", "k1", 2)
	p, err := openProposal(ctx, s, again, 3)
	if err != nil || p.ID != "p-1" || p.Count != 2 || !sameTime(p.UpdatedAt, at(2)) {
		t.Errorf("OpenProposal(same key) = %s count %d updated %v, %v; want p-1 count 2 updated at(2)", p.ID, p.Count, p.UpdatedAt, err)
	}
	for i, key := range []string{"k2", "k3"} {
		must(t, fmt.Sprintf("OpenProposal(%s)", key), second(openProposal(ctx, s, proposal("alpha", fmt.Sprintf("p-%d", i+2), key, 3), 3)))
	}
	wantErr(t, "OpenProposal(past max)", second(openProposal(ctx, s, proposal("alpha", "p-4", "k4", 4), 3)), store.ErrFull)
	if p, err := openProposal(ctx, s, proposal("alpha", "p-x", "k1", 4), 3); err != nil || p.Count != 3 {
		t.Errorf("OpenProposal(same key, full) = count %d, %v; want 3, nil", p.Count, err)
	}
	wantErr(t, "OpenProposal(other box)", second(openProposal(ctx, s, proposal("beta", "p-b", "k1", 4), 3)), nil)

	list, err := s.ListProposals(ctx, "alpha", store.ProposalPending, at(5), 10)
	if err != nil || len(list) != 3 || list[0].ID != "p-3" && list[0].ID != "p-2" {
		t.Fatalf("ListProposals(alpha, pending) = %+v, %v; want 3, newest first", list, err)
	}
	if all, err := s.ListProposals(ctx, "", "", at(5), 10); err != nil || len(all) != 4 {
		t.Errorf("ListProposals(all) = %d, %v; want 4, nil", len(all), err)
	}

	// Approve p-1 for an hour, deny p-2; a second approval is refused.
	ap, err := s.DecideProposal(ctx, "p-1", store.ProposalApproved, at(3605), "owner", at(5))
	if err != nil || ap.State != store.ProposalApproved || !sameTime(ap.Until, at(3605)) || ap.DecidedBy != "owner" || !sameTime(ap.DecidedAt, at(5)) {
		t.Fatalf("DecideProposal(approve) = %+v, %v", ap, err)
	}
	wantErr(t, "DecideProposal(approve again)", second(s.DecideProposal(ctx, "p-1", store.ProposalApproved, time.Time{}, "owner", at(6))), store.ErrNotPending)
	wantErr(t, "DecideProposal(none)", second(s.DecideProposal(ctx, "p-none", store.ProposalDenied, time.Time{}, "owner", at(6))), store.ErrNotFound)
	wantErr(t, "DecideProposal(deny)", second(s.DecideProposal(ctx, "p-2", store.ProposalDenied, time.Time{}, "owner", at(6))), nil)
	in, err := s.ApprovalsInForce(ctx, "alpha", tokenOf("alpha"), store.ProposalRule, at(10))
	if err != nil || len(in) != 1 || in[0].ID != "p-1" {
		t.Errorf("ApprovalsInForce = %+v, %v; want p-1", in, err)
	}
	answer(s.ApprovalsInForce(ctx, "alpha", tokenOf("alpha"), store.ProposalRule, at(3605))).none(t, "ApprovalsInForce(after its end)")
	answer(s.ApprovalsInForce(ctx, "alpha", tokenOf("alpha"), store.ProposalHost, at(10))).none(t, "ApprovalsInForce(other kind)")
	// An approval is used once, while in force.
	wantErr(t, "UseApproval(after its end)", s.UseApproval(ctx, "p-1", at(3605)), store.ErrNotPending)
	wantErr(t, "UseApproval(denied)", s.UseApproval(ctx, "p-2", at(10)), store.ErrNotPending)
	wantErr(t, "UseApproval", s.UseApproval(ctx, "p-1", at(10)), nil)
	err = s.UseApproval(ctx, "p-1", at(11))
	wantErr(t, "UseApproval(again)", err, store.ErrNotPending)
	// The refusal names its operation once.
	if want := `use approval "p-1": ` + store.ErrNotPending.Error(); err == nil || err.Error() != want {
		t.Errorf("UseApproval(again) = %v, want the message %q", err, want)
	}
	answer(s.ApprovalsInForce(ctx, "alpha", tokenOf("alpha"), store.ProposalRule, at(12))).none(t, "ApprovalsInForce after use")
	// A new proposal with key k1 opens again: the approved one is no
	// longer pending.
	if p, err := openProposal(ctx, s, proposal("alpha", "p-5", "k1", 7), 3); err != nil || p.ID != "p-5" || p.Count != 1 {
		t.Errorf("OpenProposal(k1 after approval) = %s count %d, %v; want p-5 count 1", p.ID, p.Count, err)
	}

	// p-3 expires unanswered; it can no longer be decided, reads as
	// expired, and its place is free.
	late := at(3 + 3600)
	if p, err := s.Proposal(ctx, "p-3", late); err != nil || p.State != store.ProposalExpired {
		t.Errorf("Proposal(p-3, late) = %s, %v; want expired", p.State, err)
	}
	wantErr(t, "DecideProposal(expired)", second(s.DecideProposal(ctx, "p-3", store.ProposalApproved, time.Time{}, "owner", late)), store.ErrNotPending)
	if ex, err := s.ListProposals(ctx, "alpha", store.ProposalExpired, late, 10); err != nil || len(ex) != 1 || ex[0].ID != "p-3" {
		t.Errorf("ListProposals(expired) = %+v, %v; want p-3", ex, err)
	}
	p6 := proposal("alpha", "p-6", "k6", 3+3600)
	wantErr(t, "OpenProposal(after expiry)", second(openProposal(ctx, s, p6, 3)), nil)
	wantErr(t, "Proposal(none)", second(s.Proposal(ctx, "p-none", late)), store.ErrNotFound)

	// A budget proposal keeps its payer, and names no secret.
	budget := store.Proposal{ID: "p-budget", Attempt: store.Attempt{Box: "beta", Kind: store.ProposalBudget, Model: "claude-sonnet-4-5", Amount: 6564,
		Payer: "visitor github:ann", Reason: "past github:ann's budget"}, Key: "kb", CreatedAt: at(7), ExpiresAt: at(7 + 3600)}
	wantErr(t, "OpenProposal(budget)", second(openProposal(ctx, s, budget, 3)), nil)
	wantErr(t, "DecideProposal(budget)", second(s.DecideProposal(ctx, "p-budget", store.ProposalApproved, time.Time{}, "owner", at(8))), nil)
	if in, err := s.ApprovalsInForce(ctx, "beta", tokenOf("beta"), store.ProposalBudget, at(9)); err != nil || len(in) != 1 || in[0].Payer != "visitor github:ann" || in[0].Secret != "" {
		t.Errorf("ApprovalsInForce(beta, budget) = %+v, %v; want p-budget paid by visitor github:ann, no secret", in, err)
	}

	// A denial withdraws an approval in force, at once; not one used or
	// ended, nor one already withdrawn.
	wd, err := s.DecideProposal(ctx, "p-budget", store.ProposalDenied, time.Time{}, "admin:a1", at(9))
	if err != nil || wd.State != store.ProposalDenied || wd.DecidedBy != "admin:a1" || !sameTime(wd.DecidedAt, at(9)) {
		t.Errorf("DecideProposal(withdraw) = %+v, %v; want denied by admin:a1 at 9", wd, err)
	}
	answer(s.ApprovalsInForce(ctx, "beta", tokenOf("beta"), store.ProposalBudget, at(9))).none(t, "ApprovalsInForce after the withdrawal")
	for _, id := range []string{"p-budget", "p-1"} { // withdrawn; used
		wantErr(t, "DecideProposal(withdraw "+id+")", second(s.DecideProposal(ctx, id, store.ProposalDenied, time.Time{}, "owner", at(12))), store.ErrNotPending)
	}

	// Asks.
	for _, sc := range []string{"secret:GITHUB", "hosts", "hosts"} {
		must(t, fmt.Sprintf("SetAsk(%s)", sc), s.SetAsk(ctx, "alpha", sc, true))
	}
	wantErr(t, "SetAsk(no box)", s.SetAsk(ctx, "nobody", "hosts", true), store.ErrNotFound)
	answer(s.ListAsks(ctx, "alpha")).is(t, "ListAsks", []string{"hosts", "secret:GITHUB"})
	must(t, "SetAsk(alpha, hosts, off)", s.SetAsk(ctx, "alpha", "hosts", false))
	answer(s.ListAsks(ctx, "alpha")).is(t, "ListAsks after off", []string{"secret:GITHUB"})
	noChange(t, s, "proposals", seq)

	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	answer(s.ListProposals(ctx, "alpha", "", late, 10)).none(t, "ListProposals after DeleteBox")
	answer(s.ListAsks(ctx, "alpha")).none(t, "ListAsks after DeleteBox")
}

// testConcurrentProposals: many refusals at once, all different, write
// at most max pending rows; all identical, one row whose count is theirs.
func testConcurrentProposals(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const n, max = 24, 5
	key := func(j int) string { // even: all different; odd: all the same
		if j%2 == 1 {
			return "same"
		}
		return fmt.Sprintf("d%d", j/2)
	}
	for j, err := range atOnce(2*n, func(j int) error {
		_, err := openProposal(ctx, s, proposal("alpha", fmt.Sprintf("p-%s%d", key(j)[:1], j/2), key(j), 1), max)
		return err
	}) {
		if err != nil && !errors.Is(err, store.ErrFull) {
			t.Errorf("OpenProposal(%s) = %v", key(j), err)
		}
	}
	list, err := s.ListProposals(ctx, "alpha", "", at(2), 100)
	if err != nil || len(list) > max {
		t.Fatalf("ListProposals = %d rows, %v; want at most %d", len(list), err, max)
	}
}

// testProposalOfAReenrolledBox: a refused request admitted with the token
// of a box removed since opens no proposal of the box added under its
// name (whose owner would approve it, widening that box); one admitted
// with a box's token before its rotation opens one within the grace and
// none past it.
func testProposalOfAReenrolledBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := mustCreateBox(t, s, "alpha")
	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(1), PayerKind: "shared"}))
	wantErr(t, "OpenProposal(alpha) with the removed box's token", second(s.OpenProposal(ctx, proposal("alpha", "p-old", "k1", 2), old.TokenHash, 3)), store.ErrNotFound)
	answer(s.ListProposals(ctx, "alpha", "", at(2), 10)).none(t, "ListProposals(alpha) after a proposal with the removed box's token")

	must(t, "OpenProposal(alpha) with its own token", second(s.OpenProposal(ctx, proposal("alpha", "p-1", "k1", 3), hash("token-alpha-2"), 3)))
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), GraceUntil: time.Now().Add(time.Hour)}))
	must(t, "OpenProposal(alpha) with its token before the rotation", second(s.OpenProposal(ctx, proposal("alpha", "p-2", "k2", 4), hash("token-alpha-2"), 3)))
	wantErr(t, "OpenProposal(alpha) with another box's token", second(s.OpenProposal(ctx, proposal("alpha", "p-3", "k3", 5), hash("token-beta"), 3)), store.ErrNotFound)
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-4"), GraceUntil: time.Now().Add(-time.Second)}))
	err := second(s.OpenProposal(ctx, proposal("alpha", "p-4", "k4", 6), hash("token-alpha-3"), 3))
	wantErr(t, "OpenProposal(alpha) with its token before the rotation, past the grace", err, store.ErrGraceEnded)
	wantErr(t, "OpenProposal(alpha) with its token before the rotation, past the grace", err, store.ErrNotFound)
	if ps, err := s.ListProposals(ctx, "alpha", "", at(7), 10); err != nil || len(ps) != 2 {
		t.Errorf("ListProposals(alpha) = %+v, %v; want p-1 and p-2", ps, err)
	}
}

// testApprovalsOfAReenrolledBox: the approvals in force and the asks a
// refused request reads are read only while its box holds the token the
// request was admitted with: one of a box removed since reads none of
// the box added under its name; one with a box's token before its
// rotation reads the box's within the grace and none past it, nor once
// the token is replaced with no grace, nor past the token's expiry.
func testApprovalsOfAReenrolledBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := mustCreateBox(t, s, "alpha")
	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(1), PayerKind: "shared"}))
	must(t, "OpenProposal(alpha) with its own token", second(s.OpenProposal(ctx, proposal("alpha", "p-1", "k1", 2), hash("token-alpha-2"), 3)))
	must(t, "DecideProposal(p-1, approve always)", second(s.DecideProposal(ctx, "p-1", store.ProposalApproved, time.Time{}, "owner", at(3))))
	must(t, "SetAsk(alpha, secret:GITHUB)", s.SetAsk(ctx, "alpha", "secret:GITHUB", true))
	reads := func(call, tokenHash string, want bool) {
		t.Helper()
		in, err := s.ApprovalsInForce(ctx, "alpha", tokenHash, store.ProposalRule, at(4))
		if err != nil || (len(in) == 1) != want || len(in) > 1 || (want && in[0].ID != "p-1") {
			t.Errorf("ApprovalsInForce(alpha) %s = %+v, %v; want p-1: %v", call, in, err, want)
		}
		asks, err := s.ListAsksOfToken(ctx, "alpha", tokenHash)
		if err != nil || (len(asks) == 1) != want || len(asks) > 1 {
			t.Errorf("ListAsksOfToken(alpha) %s = %v, %v; want secret:GITHUB: %v", call, asks, err, want)
		}
	}
	reads("with the removed box's token", old.TokenHash, false)
	reads("with another box's token", hash("token-beta"), false)
	reads("with its own token", hash("token-alpha-2"), true)
	answer(s.ListAsks(ctx, "alpha")).is(t, "ListAsks(alpha), the operator's", []string{"secret:GITHUB"})

	alphasTokenLife(t, s, reads)
}

// alphasTokenLife takes the box alpha, holding token-alpha-2, through a
// rotation with a grace, the grace's end, a rotation with none and a
// token past its expiry, calling reads after each with the tokens a read
// made on a request's behalf must take (want) or refuse.
func alphasTokenLife(t *testing.T, s store.Store, reads func(call, tokenHash string, want bool)) {
	t.Helper()
	ctx := t.Context()
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), GraceUntil: time.Now().Add(time.Hour)}))
	reads("with its token before the rotation", hash("token-alpha-2"), true)
	reads("with its new token", hash("token-alpha-3"), true)
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-4"), GraceUntil: time.Now().Add(-time.Second)}))
	reads("with its token before the rotation, past the grace", hash("token-alpha-3"), false)
	must(t, "RotateToken(alpha)", s.RotateToken(ctx, "alpha", hash("token-alpha-5")))
	reads("with its token before a rotation with no grace", hash("token-alpha-4"), false)
	reads("with its token", hash("token-alpha-5"), true)
	must(t, "ReplaceToken(alpha) expired", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-6"), ExpiresAt: time.Now().Add(-time.Second)}))
	reads("with its token past its expiry", hash("token-alpha-6"), false)
}
