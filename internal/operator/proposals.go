package operator

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/store"
)

// Proposals and ask mode are read from the store at each refusal, never
// cached (package approval), so a decision or a change of ask mode is in
// force on every replica once it is answered: no Changed.

// ProposalView is a proposal as the admin API writes it.
type ProposalView struct {
	ID string `json:"id"`
	store.Attempt
	Count     int     `json:"count"`
	State     string  `json:"state"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
	ExpiresAt string  `json:"expires_at"`
	Until     *string `json:"until"`
	DecidedBy string  `json:"decided_by,omitempty"`
	DecidedAt *string `json:"decided_at"`
}

// ProposalViewOf is p as the admin API writes it. An approved proposal's
// Until is null for always.
func ProposalViewOf(p store.Proposal) ProposalView {
	v := ProposalView{ID: p.ID, Attempt: p.Attempt, Count: p.Count, State: p.State, CreatedAt: p.CreatedAt.UTC().Format(time.RFC3339),
		UpdatedAt: p.UpdatedAt.UTC().Format(time.RFC3339), ExpiresAt: p.ExpiresAt.UTC().Format(time.RFC3339), DecidedBy: p.DecidedBy,
		DecidedAt: optionalTime(p.DecidedAt)}
	if p.State == store.ProposalApproved {
		v.Until = optionalTime(p.Until)
	}
	return v
}

// Attempted says what the proposal's box tried, for a person.
func (v ProposalView) Attempted() string {
	return approval.Attempted(v.Attempt, func(s string) string { return s }, "for")
}

// ProposalList is the answer to GET /api/proposals.
type ProposalList struct {
	Proposals []ProposalView `json:"proposals"`
}

// Decision is the body of POST /api/proposals/{id}/approve: For is how
// long the approval lasts ("15m", "1h", "7d", "always"; default "1h").
type Decision struct {
	For string `json:"for"`
}

// AskList is the answer to GET /api/boxes/{name}/asks: the scopes the
// box has in ask mode ("hosts", "budget", "secret:NAME").
type AskList struct {
	Asks []string `json:"asks"`
}

// approvals is the approval service over s's store and clock: deciding
// and listing proposals and setting ask mode read nothing else of it.
func (s *Service) approvals() *approval.Service {
	a, _ := approval.New(approval.Config{Store: s.cfg.Store, Now: s.cfg.Now, Logger: s.cfg.Logger}) // never fails: s has a store
	return a
}

// decider is who s's decisions name (a proposal's decided_by): its
// origin's Decider, or else "cli" through the CLI and "admin" through the
// admin API.
func (s *Service) decider() string {
	switch {
	case s.origin.Decider != "":
		return s.origin.Decider
	case s.origin.Method == "CLI":
		return "cli"
	}
	return "admin"
}

// ListProposals returns box's proposals ("" for every box's) in state
// ("" for any), newest first, at most approval.MaxList. Invalid for a
// state that is none.
func (s *Service) ListProposals(ctx context.Context, box, state string) ([]ProposalView, error) {
	ps, err := s.approvals().List(ctx, box, state)
	if err != nil {
		return nil, proposalError(err)
	}
	return views(ps, ProposalViewOf), nil
}

// Proposal returns the proposal id. NotFound for none.
func (s *Service) Proposal(ctx context.Context, id string) (ProposalView, error) {
	p, err := s.approvals().Get(ctx, id)
	if err != nil {
		return ProposalView{}, proposalError(err)
	}
	return ProposalViewOf(p), nil
}

// ApproveProposal approves the pending proposal id for forWords
// (approval.ParseFor; "" is an hour): the box's same request is allowed
// until then. Invalid for a bad length, NotFound for no such proposal,
// Conflict for one no longer pending.
func (s *Service) ApproveProposal(ctx context.Context, id, forWords string) (ProposalView, error) {
	if forWords == "" {
		forWords = "1h"
	}
	d, always, err := approval.ParseFor(forWords)
	if err != nil {
		return ProposalView{}, proposalError(err)
	}
	p, err := s.approvals().Approve(ctx, id, d, always, s.decider())
	if err != nil {
		return ProposalView{}, proposalError(err)
	}
	until := "always"
	if !p.Until.IsZero() {
		until = "until " + p.Until.UTC().Format(time.RFC3339)
	}
	v := ProposalViewOf(p)
	if err := s.done(ctx, p.Box, http.StatusOK, "approved proposal "+p.ID+" "+until+": "+v.Attempted(), "proposal", p.ID); err != nil {
		return ProposalView{}, err
	}
	return v, nil
}

// DenyProposal denies the pending proposal id, or withdraws it when it
// is an approval in force: the box's next identical request is refused.
// NotFound for no such proposal, Conflict for one neither pending nor in
// force.
func (s *Service) DenyProposal(ctx context.Context, id string) (ProposalView, error) {
	p, err := s.approvals().Deny(ctx, id, s.decider())
	if errors.Is(err, store.ErrNotPending) {
		return ProposalView{}, Errorf(Conflict, "That proposal is neither waiting nor an approval in force: it was denied, expired unanswered, or its approval ended or was used.")
	}
	if err != nil {
		return ProposalView{}, proposalError(err)
	}
	v := ProposalViewOf(p)
	if err := s.done(ctx, p.Box, http.StatusOK, "denied proposal "+p.ID+": "+v.Attempted(), "proposal", p.ID); err != nil {
		return ProposalView{}, err
	}
	return v, nil
}

// SetAsk puts box's scope ("hosts", "budget", "secret:NAME") in ask mode
// (on) or takes it out, and returns the box's scopes in ask mode.
// Invalid for a bad box name or scope, NotFound for no such box.
func (s *Service) SetAsk(ctx context.Context, box, scope string, on bool) ([]string, error) {
	if err := CheckBoxName(box); err != nil {
		return nil, err
	}
	a := s.approvals()
	if err := a.SetAsk(ctx, box, scope, on); errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(NotFound, "%s", NoBox(box))
	} else if err != nil {
		return nil, proposalError(err)
	}
	msg := "asks about " + scope
	if !on {
		msg = "stops asking about " + scope
	}
	if err := s.done(ctx, box, http.StatusOK, msg); err != nil {
		return nil, err
	}
	return s.Asks(ctx, box)
}

// Asks returns the scopes box has in ask mode.
func (s *Service) Asks(ctx context.Context, box string) ([]string, error) {
	asks, err := s.approvals().Asks(ctx, box)
	if err != nil {
		return nil, proposalError(err)
	}
	return append([]string{}, asks...), nil
}

// proposalError maps an approval's error to a refusal.
func proposalError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Errorf(NotFound, "No proposal has that ID: `boxbroker proposals --state all` lists them.")
	case errors.Is(err, store.ErrNotPending):
		return Errorf(Conflict, "That proposal is no longer waiting: it was approved, denied, or expired unanswered.")
	case errors.Is(err, approval.ErrBadFor):
		return Errorf(Invalid, "An approval lasts from 1m to 366d (15m, 1h, 7d ...), or always.")
	case errors.Is(err, approval.ErrBadSecretName):
		return Errorf(Invalid, "A secret's name is upper-case, as `boxbroker secret set` takes it (^[A-Z][A-Z0-9_]{0,39}$), such as secret:GITHUB: a scope of another name would match no refusal.")
	case errors.Is(err, approval.ErrBadScope):
		return Errorf(Invalid, "A scope is hosts, budget, or secret:NAME.")
	case errors.Is(err, approval.ErrBadState):
		return Errorf(Invalid, "A state is pending, approved, denied, expired or used; with none, proposals of every state are listed.")
	}
	return StoreError(err, "", "")
}
