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
	a.Token = "the new box's token"
	if _, words := svc.Ask(ctx, a, slog.New(slog.NewTextHandler(&buf, nil)), "unused"); words == "" {
		t.Errorf("Ask(request of the new box) names no proposal; want one")
	}
}
