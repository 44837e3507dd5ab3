package store

import (
	"context"
	"errors"
	"time"
)

// Proposal kinds: what a refused request asked for.
const (
	// ProposalRule: a request outside a secret's rules; an approval
	// allows that method at that path for that secret.
	ProposalRule = "rule"
	// ProposalHost: a proxy CONNECT to a host with no secret and no
	// passthrough entry; an approval lets the box's tunnels to that
	// host:port pass through, never with a secret.
	ProposalHost = "host"
	// ProposalBudget: a call past the box's budget; an approval lets the
	// box spend that amount more.
	ProposalBudget = "budget"
)

// Proposal states.
const (
	ProposalPending  = "pending"
	ProposalApproved = "approved"
	ProposalDenied   = "denied"
	ProposalExpired  = "expired"
	// ProposalUsed: an approval of ProposalBudget spent by the call it
	// let past the budget.
	ProposalUsed = "used"
)

// ErrNotPending: the proposal was already approved, denied, or expired
// unanswered.
var ErrNotPending = errors.New("proposal not pending")

// ErrFull: the box already has as many pending proposals as allowed.
var ErrFull = errors.New("too many pending proposals")

// Attempt is what a refused request tried, as a Proposal keeps it. Its
// JSON names are those the admin API writes a proposal with
// (operator.ProposalView).
type Attempt struct {
	Box string `json:"box"`
	// Kind is ProposalRule, ProposalHost or ProposalBudget.
	Kind string `json:"kind"`
	// Secret is the secret's name (ProposalRule), else "".
	Secret string `json:"secret,omitempty"`
	// Method and Path are what the box sent (ProposalRule): the method,
	// and the path under the secret's base URL as the box escaped it,
	// without the query.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Host is the secret's base URL (ProposalRule), or host:port
	// (ProposalHost).
	Host string `json:"host,omitempty"`
	// Model and Amount (micro-dollars) are the call past the budget
	// (ProposalBudget).
	Model  string `json:"model,omitempty"`
	Amount int64  `json:"amount_micros,omitempty"`
	// Payer is who pays the call past the budget, as the chant-payer
	// header writes it ("shared", "visitor github:ann"; ProposalBudget),
	// else "": an approval lets only that payer's call past a budget.
	Payer string `json:"payer,omitempty"`
	// Reason is the refusal's words, for the person deciding.
	Reason string `json:"reason"`
}

// Proposal is a refused request a person may approve: which box, what it
// tried, and why it was refused. It never holds a secret's value or a
// token: the path is kept without its query.
type Proposal struct {
	// ID names it in the CLI, the admin API and the page.
	ID string
	Attempt
	// Key is the same for identical attempts of one box: a second
	// identical refusal adds to Count rather than writing a row.
	Key   string
	Count int
	// State is one of the Proposal states.
	State     string
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when a pending proposal expires unanswered.
	ExpiresAt time.Time
	// Until is when an approval ends; zero for always.
	Until time.Time
	// DecidedBy names who approved or denied it; DecidedAt when.
	DecidedBy string
	DecidedAt time.Time
}

// Proposals keeps proposals and which of a box's refusals open them (its
// asks). They are read on the refusal path straight from the store,
// never cached, so an approval written through one replica is in force
// on the next request whichever replica it reaches; their writes record
// no change.
type Proposals interface {
	// OpenProposal records p as pending, or, when p.Box has a pending
	// proposal with p.Key, adds one to its Count and sets its UpdatedAt;
	// it returns the proposal as stored. Pending proposals past their
	// ExpiresAt are expired first. ErrFull when the box already has max
	// pending proposals and none with p.Key; ErrNotFound if no box holds
	// the token that hashes to tokenHash, the one the refused request was
	// admitted with (its token, or the one before its last rotation,
	// within the grace): a request of a box removed is not proposed to
	// the owner of a box added since under its name, whose approval would
	// widen that box. ErrGraceEnded and ErrTokenExpired (ErrNotFound
	// both) as for SaveDeclaration.
	OpenProposal(ctx context.Context, p Proposal, tokenHash string, max int) (Proposal, error)
	// Proposal returns the proposal with that ID, or ErrNotFound. A
	// pending one past its ExpiresAt at at is returned as expired.
	Proposal(ctx context.Context, id string, at time.Time) (Proposal, error)
	// ListProposals returns box's proposals ("" for every box's) in
	// state ("" for any), newest first, at most limit; a pending one past
	// its ExpiresAt at at is returned as expired.
	ListProposals(ctx context.Context, box, state string, at time.Time, limit int) ([]Proposal, error)
	// DecideProposal sets a pending proposal's State to state
	// (ProposalApproved or ProposalDenied), its Until, DecidedBy and
	// DecidedAt (at), and returns it; a denial also withdraws an approval
	// in force at at. ErrNotFound if no such proposal, ErrNotPending if
	// it is not pending at at (nor, for a denial, an approval in force).
	DecideProposal(ctx context.Context, id, state string, until time.Time, by string, at time.Time) (Proposal, error)
	// ApprovalsInForce returns box's approved proposals of kind whose
	// Until is zero or after at, read while the box holds the token that
	// hashes to tokenHash, the one the refused request was admitted with
	// (its token, before its expiry, or the one before its last
	// rotation, within the grace, by the database's clock), in the same
	// statement: none otherwise, so that a request of a box removed, or
	// whose token was replaced, since it was admitted is allowed by no
	// approval of the box added under its name, nor by the box's own.
	ApprovalsInForce(ctx context.Context, box, tokenHash, kind string, at time.Time) ([]Proposal, error)
	// UseApproval marks the approval id, in force at at, used (State
	// ProposalUsed), so that it lets one call past a budget, once.
	// ErrNotPending if it is not an approval in force.
	UseApproval(ctx context.Context, id string, at time.Time) error
	// SetAsk turns box's ask mode for scope on or off (see package
	// approval for the scopes); ErrNotFound if no box.
	SetAsk(ctx context.Context, box, scope string, on bool) error
	// ListAsks returns the scopes box has in ask mode, sorted.
	ListAsks(ctx context.Context, box string) ([]string, error)
	// ListAsksOfToken is ListAsks for a refused request of box admitted
	// with the token that hashes to tokenHash: the scopes are read while
	// the box holds that token, as ApprovalsInForce reads approvals, and
	// are none otherwise.
	ListAsksOfToken(ctx context.Context, box, tokenHash string) ([]string, error)
}
