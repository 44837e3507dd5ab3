package approval_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/token"
)

// reenrolling is a store that, as the first proposal is opened, removes
// its box and adds a new one under its name, with another token, whose
// owner asks about the same secret's rules: the operator re-enrolling
// the box while its refused request is in flight.
type reenrolling struct {
	*sqlite.Store
	once sync.Once
}

func (r *reenrolling) OpenProposal(ctx context.Context, p store.Proposal, tokenHash string, max int) (store.Proposal, error) {
	var err error
	r.once.Do(func() {
		if err = r.DeleteBox(ctx, p.Box); err != nil {
			return
		}
		if err = r.CreateBox(ctx, store.Box{Name: p.Box, TokenHash: token.Hash("the new box's token"), CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
			return
		}
		err = r.SetAsk(ctx, p.Box, approval.SecretScope("GITHUB"), true)
	})
	if err != nil {
		return store.Proposal{}, err
	}
	return r.Store.OpenProposal(ctx, p, tokenHash, max)
}

// TestRefused_RequestOfARemovedBoxIsNotProposedToTheNewOne: a refused
// request admitted with the token of a box removed before its proposal
// is written opens no proposal of the box added under its name
// meanwhile, whose owner would otherwise see it as that box's and might
// approve it, widening that box: the request stays refused, naming no
// proposal, and no one is notified.
func TestRefused_RequestOfARemovedBoxIsNotProposedToTheNewOne(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: token.Hash(boxToken), CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	var notified []store.Proposal
	svc, err := approval.New(approval.Config{Store: &reenrolling{Store: st}, Notify: func(p store.Proposal) { notified = append(notified, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	approved, words := svc.Ask(ctx, rule("/repos/acme/x/issues"), slog.New(slog.NewTextHandler(&buf, nil)), "unused")
	if approved || words != "" {
		t.Errorf("Ask(request of the removed box) = %v, %q; want refused, no proposal named", approved, words)
	}
	if ps, err := st.ListProposals(ctx, "alpha", "", time.Now(), 10); err != nil || len(ps) != 0 {
		t.Errorf("the new alpha's proposals = %+v, %v; want none of the removed box's", ps, err)
	}
	if len(notified) != 0 {
		t.Errorf("notified %+v, want none", notified)
	}
	// The new box's own refused request opens one: the refusal above was
	// the token's.
	a := rule("/repos/acme/x/issues")
	a.TokenHash = token.Hash("the new box's token")
	if _, words := svc.Ask(ctx, a, slog.New(slog.NewTextHandler(&buf, nil)), "unused"); words == "" {
		t.Errorf("Ask(request of the new box) names no proposal; want one")
	}
}

// TestRefused_RequestOfARemovedBoxIsNotAllowedByTheNewOnesApproval: a
// refused request admitted with the token of a box removed since (the
// broker's cache still taking it) is allowed by no approval the box
// added under its name has in force, and reads none of its asks; nor is
// one with a token replaced (with no grace) since.
func TestRefused_RequestOfARemovedBoxIsNotAllowedByTheNewOnesApproval(t *testing.T) {
	svc, st, _, _ := newService(t)
	ctx := t.Context()
	mine := reenrol(t, svc, st, "the new box's token")
	v, err := svc.Refused(ctx, mine)
	if err != nil || v.Proposal.ID == "" {
		t.Fatalf("Refused(the new box's request) = %+v, %v; want a proposal", v, err)
	}
	if _, err := svc.Approve(ctx, v.Proposal.ID, 0, true, "owner"); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Refused(ctx, mine); err != nil || !v.Approved {
		t.Fatalf("Refused(the new box's request, approved) = %+v, %v; want approved, or this test shows nothing", v, err)
	}

	if v, err := svc.Refused(ctx, rule("/repos/acme/x/issues")); err != nil || v.Approved || v.Asked {
		t.Errorf("Refused(the removed box's request) = %+v, %v; want neither approved nor asked", v, err)
	}
	if err := st.RotateToken(ctx, "alpha", token.Hash("a third token")); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Refused(ctx, mine); err != nil || v.Approved || v.Asked {
		t.Errorf("Refused(a request with the token replaced) = %+v, %v; want neither approved nor asked", v, err)
	}
}

// TestRefused_DenialIsTheBoxsOwnAcrossReenrolment: a person's denial of
// a box's attempt stands for that box alone. The box added under a
// removed one's name asks afresh about the attempt the removed box was
// denied (the denial went with its box), and once the new box's own
// attempt is denied, a request admitted with the removed box's token
// (from memory not yet told) is told of no denial, and opens nothing.
func TestRefused_DenialIsTheBoxsOwnAcrossReenrolment(t *testing.T) {
	svc, st, _, _ := newService(t)
	ctx := t.Context()
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	old := rule("/repos/acme/x/issues")
	v, err := svc.Refused(ctx, old)
	if err != nil || v.Proposal.ID == "" {
		t.Fatalf("Refused(the box's request) = %+v, %v; want a proposal", v, err)
	}
	if _, err := svc.Deny(ctx, v.Proposal.ID, "owner"); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Refused(ctx, old); err != nil || v.Denied.ID == "" {
		t.Fatalf("Refused(the denied request again) = %+v, %v; want the denial, or this test shows nothing", v, err)
	}

	mine := reenrol(t, svc, st, "the new box's token")
	v, err = svc.Refused(ctx, mine)
	if err != nil || v.Denied.ID != "" || v.Proposal.ID == "" {
		t.Fatalf("Refused(the new box's request) = %+v, %v; want a proposal of its own, no denial of the removed box's", v, err)
	}
	if _, err := svc.Deny(ctx, v.Proposal.ID, "owner"); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Refused(ctx, old); err != nil || v.Denied.ID != "" || v.Proposal.ID != "" || svc.Words(v) != "" {
		t.Errorf("Refused(the removed box's request) = %+v, %v; want no denial of the new box's named, nothing opened", v, err)
	}
}

// reenrol removes alpha and adds another box under its name, with the
// token newToken, whose owner asks about GITHUB's rules, and returns the
// new box's attempt of rule("/repos/acme/x/issues").
func reenrol(t *testing.T, svc *approval.Service, st *sqlite.Store, newToken string) approval.Attempt {
	t.Helper()
	ctx := t.Context()
	if err := st.DeleteBox(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: token.Hash(newToken), CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	mine := rule("/repos/acme/x/issues")
	mine.TokenHash, mine.Forbidden = token.Hash(newToken), []string{newToken}
	return mine
}
