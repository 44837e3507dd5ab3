package deadline

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// OpenProposal is store.Proposals's, with its deadline.
func (s *Store) OpenProposal(ctx context.Context, p store.Proposal, max int) (store.Proposal, error) {
	return do(s, ctx, "open proposal", func(ctx context.Context) (store.Proposal, error) { return s.st.OpenProposal(ctx, p, max) })
}

// Proposal is store.Proposals's, with its deadline.
func (s *Store) Proposal(ctx context.Context, id string, at time.Time) (store.Proposal, error) {
	return do(s, ctx, "read proposal", func(ctx context.Context) (store.Proposal, error) { return s.st.Proposal(ctx, id, at) })
}

// ListProposals is store.Proposals's, with its deadline.
func (s *Store) ListProposals(ctx context.Context, box, state string, at time.Time, limit int) ([]store.Proposal, error) {
	return do(s, ctx, "list proposals", func(ctx context.Context) ([]store.Proposal, error) {
		return s.st.ListProposals(ctx, box, state, at, limit)
	})
}

// DecideProposal is store.Proposals's, with its deadline.
func (s *Store) DecideProposal(ctx context.Context, id, state string, until time.Time, by string, at time.Time) (store.Proposal, error) {
	return do(s, ctx, "decide proposal", func(ctx context.Context) (store.Proposal, error) {
		return s.st.DecideProposal(ctx, id, state, until, by, at)
	})
}

// ApprovalsInForce is store.Proposals's, with its deadline.
func (s *Store) ApprovalsInForce(ctx context.Context, box, kind string, at time.Time) ([]store.Proposal, error) {
	return do(s, ctx, "read approvals", func(ctx context.Context) ([]store.Proposal, error) { return s.st.ApprovalsInForce(ctx, box, kind, at) })
}

// SetAsk is store.Proposals's, with its deadline.
func (s *Store) SetAsk(ctx context.Context, box, scope string, on bool) error {
	return do0(s, ctx, "set ask", func(ctx context.Context) error { return s.st.SetAsk(ctx, box, scope, on) })
}

// ListAsks is store.Proposals's, with its deadline.
func (s *Store) ListAsks(ctx context.Context, box string) ([]string, error) {
	return do(s, ctx, "list asks", func(ctx context.Context) ([]string, error) { return s.st.ListAsks(ctx, box) })
}

// UseApproval is store.Proposals's, with its deadline.
func (s *Store) UseApproval(ctx context.Context, id string, at time.Time) error {
	return do0(s, ctx, "use approval", func(ctx context.Context) error { return s.st.UseApproval(ctx, id, at) })
}
