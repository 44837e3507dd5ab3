// Package approval turns refusals a person may approve into proposals.
//
// An owner puts a box's secret rules (scope "secret:NAME"), its budget
// ("budget") or the proxy's unknown hosts ("hosts") in ask mode. Then a
// request refused there (outside the secret's rules; past the budget; a
// CONNECT to a host with no secret and no passthrough entry) also opens
// a proposal: which box, what it tried, and why it was refused.
// Identical attempts merge into one proposal's count; a box holds at
// most MaxPending pending proposals; each expires unanswered after
// PendingFor. A person approves one for a while (or always) or denies
// it; an approval widens exactly what was asked — that method and path
// for that secret, that host:port as a passthrough tunnel (never with a
// secret), that amount more of the budget — and the box's next
// identical request is allowed.
//
// Everything is read from the store at the moment of a refusal, never
// cached, so an approval written through one replica is in force on the
// next request whichever replica it reaches.
package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// Ask-mode scopes.
const (
	// ScopeHosts: the proxy's CONNECTs to unknown hosts.
	ScopeHosts = "hosts"
	// ScopeBudget: calls past the box's budget.
	ScopeBudget = "budget"
	// ScopeSecret prefixes a secret's name: "secret:GITHUB" asks about
	// requests outside GITHUB's rules.
	ScopeSecret = "secret:"
)

// Defaults of Config.
const (
	DefaultMaxPending = 5
	DefaultPendingFor = 24 * time.Hour
	// MaxFor is the longest approval short of always.
	MaxFor = 366 * 24 * time.Hour
	// MinFor is the shortest approval.
	MinFor = time.Minute
)

// Sentinel errors.
var (
	// ErrBadScope: a scope that is none of the ask-mode scopes.
	ErrBadScope = errors.New("not an ask-mode scope")
	// ErrBadFor: a duration that is not "always" nor between MinFor and MaxFor.
	ErrBadFor = errors.New("not a duration from 1m to 366 days, nor always")
	// ErrBadState: a state that is none of the proposal states.
	ErrBadState = errors.New("not pending, approved, denied, expired or used")
	// ErrBadSecretName: a secret:NAME scope put in ask mode whose NAME
	// is no secret's name (protocol.IsSecretName), so that no refusal
	// would ever match it.
	ErrBadSecretName = errors.New("not a secret's name")
)

// SecretScope is the ask-mode scope of the secret name's rules.
func SecretScope(name string) string { return ScopeSecret + name }

// CheckScope returns nil for an ask-mode scope, else ErrBadScope.
func CheckScope(scope string) error {
	if scope == ScopeHosts || scope == ScopeBudget || (strings.HasPrefix(scope, ScopeSecret) && len(scope) > len(ScopeSecret) && len(scope) <= 128+len(ScopeSecret)) {
		return nil
	}
	return fmt.Errorf("%q: %w (hosts, budget, or secret:NAME)", scope, ErrBadScope)
}

// CheckAsk returns nil for a scope that may be put in ask mode (on) or
// taken out of it: CheckScope's error, and, to put a secret:NAME in,
// ErrBadSecretName when NAME is no secret's name. Taking one out stays
// open, to clear one set.
func CheckAsk(scope string, on bool) error {
	if err := CheckScope(scope); err != nil {
		return err
	}
	if name, ok := strings.CutPrefix(scope, ScopeSecret); ok && on && !protocol.IsSecretName(name) {
		return fmt.Errorf("%q: %w", scope, ErrBadSecretName)
	}
	return nil
}

// Config configures a Service.
type Config struct {
	// Store keeps proposals and asks. Required.
	Store store.Proposals
	// MaxPending bounds a box's pending proposals (default DefaultMaxPending).
	MaxPending int
	// PendingFor is how long a proposal waits for an answer (default
	// DefaultPendingFor).
	PendingFor time.Duration
	// PageURL is the owner's page, named in refusals; "" names only the CLI.
	PageURL string
	// Notify, when set, is given each newly opened proposal (a webhook's
	// queue); it must not block.
	Notify func(store.Proposal)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives failures; never a value or a token.
	Logger *slog.Logger
}

// Service opens, merges, bounds, decides and matches proposals.
type Service struct {
	cfg Config
}

// New returns a Service, or an error when Store is missing.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("approval: no store")
	}
	defaults.Positive(&cfg.MaxPending, DefaultMaxPending)
	defaults.Positive(&cfg.PendingFor, DefaultPendingFor)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	return &Service{cfg: cfg}, nil
}

// Attempt is what a refused request tried, and what no proposal of it
// may hold.
type Attempt struct {
	store.Attempt
	// TokenHash is the hash of the token the request was admitted with
	// (capability.Call.TokenHash): approvals and asks are read, and a
	// proposal opens, only while the box still holds it, so that a
	// request of a box removed (or whose token was rotated) as it was
	// refused is not proposed as one of the box added under its name
	// since.
	TokenHash string
	// Forbidden are strings no proposal may hold (the box's token): an
	// attempt holding one, or any token, opens none.
	Forbidden []string
}

// Verdict is what a refused attempt comes to.
type Verdict struct {
	// Approved: an approval in force covers the attempt; it is allowed.
	Approved bool
	// Asked: the scope is in ask mode.
	Asked bool
	// Proposal is the pending proposal the attempt opened or was merged
	// into; its ID is "" when none (not asked, full, or forbidden).
	Proposal store.Proposal
	// Full: the box already has MaxPending pending proposals.
	Full bool
	// Denied is the denial of an identical attempt within PendingFor:
	// none is opened again until it is that old.
	Denied store.Proposal
}

// scope is the ask-mode scope of a.
func (a Attempt) scope() string {
	switch a.Kind {
	case store.ProposalRule:
		return SecretScope(a.Secret)
	case store.ProposalHost:
		return ScopeHosts
	default:
		return ScopeBudget
	}
}

// key is the same for identical attempts.
func (a Attempt) key() string {
	h := sha256.Sum256([]byte(strings.Join([]string{a.Kind, a.Secret, a.Method, a.Host, a.Path, a.Model, fmt.Sprint(a.Amount), a.Payer}, "\x00")))
	return hex.EncodeToString(h[:])
}

// Matches reports whether the approval p covers a: the same kind, and
// for a rule the same secret, base URL, method and path; for a host the
// same host:port; for a budget a call of the same model, paid by the
// same payer, whose bound is at most the amount approved (used once: see
// Refused). A visitor's overrun, approved to be paid by their
// credential, is never spent on the operator's.
func Matches(p store.Proposal, a Attempt) bool {
	if p.Box != a.Box || p.Kind != a.Kind || p.State != store.ProposalApproved {
		return false
	}
	switch a.Kind {
	case store.ProposalRule:
		return p.Secret == a.Secret && p.Host == a.Host && p.Method == a.Method && p.Path == a.Path
	case store.ProposalHost:
		return strings.EqualFold(p.Host, a.Host)
	default:
		return p.Payer == a.Payer && p.Model == a.Model && a.Amount <= p.Amount
	}
}

// Refused is called where a request of a.Box was refused: it reports
// whether an approval in force covers the attempt (the request is then
// allowed), and otherwise, when the attempt's scope is in ask mode,
// opens a proposal for it or merges it into an identical pending one
// (none for an attempt holding a box's token, a field over MaxField, or
// a field that is not plain: see plain).
// An error is the store's; the caller refuses as it would have.
func (s *Service) Refused(ctx context.Context, a Attempt) (Verdict, error) {
	now := s.cfg.Now()
	// The approvals and asks are read while the box holds the token
	// its request was admitted with: a request of a box removed, or
	// whose token was replaced, since it was admitted is allowed by no
	// approval, and asks no one.
	held := a.TokenHash
	in, err := s.cfg.Store.ApprovalsInForce(ctx, a.Box, held, a.Kind, now)
	if err != nil {
		return Verdict{}, err
	}
	for _, p := range in {
		if !Matches(p, a) {
			continue
		}
		if a.Kind != store.ProposalBudget {
			return Verdict{Approved: true}, nil
		}
		// A budget approval lets one call past the budget, once.
		err := s.cfg.Store.UseApproval(ctx, p.ID, now)
		if err == nil {
			return Verdict{Approved: true}, nil
		}
		if !errors.Is(err, store.ErrNotPending) {
			return Verdict{}, err
		}
	}
	asks, err := s.cfg.Store.ListAsksOfToken(ctx, a.Box, held)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{}
	for _, sc := range asks {
		v.Asked = v.Asked || sc == a.scope()
	}
	if !v.Asked || forbidden(a) || overlong(a) || !plain(a) {
		return v, nil
	}
	// A person's denial stands for PendingFor: the box cannot ask again
	// and again.
	denied, err := s.cfg.Store.ListProposals(ctx, a.Box, store.ProposalDenied, now, MaxList)
	if err != nil {
		return v, err
	}
	for _, d := range denied {
		if d.Key == a.key() && now.Sub(d.DecidedAt) < s.cfg.PendingFor {
			v.Denied = d
			return v, nil
		}
	}
	id := newID()
	p := store.Proposal{ID: id, Attempt: a.Attempt, Key: a.key(), CreatedAt: now, ExpiresAt: now.Add(s.cfg.PendingFor)}
	got, err := s.cfg.Store.OpenProposal(ctx, p, held, s.cfg.MaxPending)
	if errors.Is(err, store.ErrFull) {
		v.Full = true
		return v, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		// The box no longer holds the token its request was admitted
		// with: the request stays refused, and asks no one.
		return v, nil
	}
	if err != nil {
		return v, err
	}
	v.Proposal = got
	if got.ID == id && s.cfg.Notify != nil {
		s.cfg.Notify(got)
	}
	return v, nil
}

// Ask is Refused for a caller that refuses on any doubt: it reports
// whether an approval in force covers a, and the words the refusal adds
// (Words). When the store fails it logs msg with args and the error as
// "err" to log at Warn, and allows nothing and adds nothing: the request
// stays refused. A nil Service (no approvals configured) allows nothing
// and adds nothing. No proposal holds one of a.Forbidden (see Refused).
func (s *Service) Ask(ctx context.Context, a Attempt, log *slog.Logger, msg string, args ...any) (approved bool, words string) {
	if s == nil {
		return false, ""
	}
	v, err := s.Refused(ctx, a)
	if err != nil {
		log.Warn(msg, append(args[:len(args):len(args)], "err", err)...)
		return false, ""
	}
	return v.Approved, s.Words(v)
}

// MaxField bounds each field of an attempt a proposal keeps: what the
// box chose (a path, a host, the model its body names, which may be as
// long as a body) and the refusal's words. An attempt with a longer one
// opens no proposal, so that a box cannot have the store keep, the
// owner's page list and the webhook send megabytes for each of its
// pending proposals. No real request needs as much.
const MaxField = 8 << 10

// overlong reports whether a field of a is over MaxField.
func overlong(a Attempt) bool {
	for _, f := range []string{a.Path, a.Host, a.Model, a.Method, a.Secret, a.Payer, a.Reason} {
		if len(f) > MaxField {
			return true
		}
	}
	return false
}

// plain reports whether a person reads a's fields as what they are, and
// each of them apart from the broker's words around it on the owner's
// page, in `boxbroker proposals` and in the webhook's messages: what the
// box chose (its method, its path as it escaped it, the model its body
// names, the host:port of its CONNECT) is printable ASCII with no space,
// and the refusal's words (which quote the path decoded) hold no
// character a person does not see as itself (a line break, a tab, a
// bidirectional override, a space other than ASCII's). Otherwise a box
// could name as its model words that read as a cheap call, or as
// another of its proposals (whose ID its refusal told it) and the
// command approving that one always. A model, a path a client escapes
// and a host name are all plain; an attempt that is not opens no
// proposal, and the refusal stands.
func plain(a Attempt) bool {
	chosen := []string{a.Method, a.Path, a.Model}
	if a.Kind == store.ProposalHost {
		chosen = append(chosen, a.Host)
	}
	for _, f := range chosen {
		if strings.ContainsFunc(f, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return false
		}
	}
	return !strings.ContainsFunc(a.Reason, func(r rune) bool { return !strconv.IsPrint(r) })
}

// forbidden reports whether a holds one of its Forbidden strings, or
// any token (a box's, a grant, an admin token, as proxy.ScrubTokens finds
// one: another box's, the box's own earlier token a rotation's grace
// keeps), as sent or percent-decoded up to three times (as egress's
// rules read a path, and so its refusal, the attempt's Reason, quotes
// it), in any of its fields, the Reason included.
func forbidden(a Attempt) bool {
	var fields []string
	for _, f := range []string{a.Path, a.Host, a.Model, a.Method, a.Secret, a.Payer, a.Reason} {
		fields = append(fields, f)
		for range 3 {
			d, err := url.PathUnescape(f)
			if err != nil || d == f {
				break
			}
			fields, f = append(fields, d), d
		}
	}
	for _, s := range fields {
		if _, n := proxy.ScrubTokens(s); n > 0 {
			return true
		}
	}
	for _, f := range a.Forbidden {
		if f == "" {
			continue
		}
		for _, s := range fields {
			if strings.Contains(s, f) {
				return true
			}
		}
	}
	return false
}

// newID returns a new proposal ID: "p-" and 12 random lowercase hex
// digits. crypto/rand.Read never fails.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "p-" + hex.EncodeToString(b[:])
}

// ParseFor reads an approval's length: "always" (zero, true), or a Go
// duration ("15m", "1h", "24h") or a number of days ("7d") from MinFor to
// MaxFor.
func ParseFor(s string) (time.Duration, bool, error) {
	s = strings.TrimSpace(s)
	if s == "always" {
		return 0, true, nil
	}
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err = fmt.Sscanf(n, "%d", &days); err == nil && fmt.Sprint(days) == n {
			d = time.Duration(days) * 24 * time.Hour
		} else {
			err = ErrBadFor
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < MinFor || d > MaxFor {
		return 0, false, fmt.Errorf("--for %q: %w", s, ErrBadFor)
	}
	return d, false, nil
}

// Approve approves the pending proposal id for d (always when always),
// by the person named by; store.ErrNotFound or store.ErrNotPending.
func (s *Service) Approve(ctx context.Context, id string, d time.Duration, always bool, by string) (store.Proposal, error) {
	now := s.cfg.Now()
	var until time.Time
	if !always {
		if d < MinFor || d > MaxFor {
			return store.Proposal{}, ErrBadFor
		}
		until = now.Add(d)
	}
	return s.cfg.Store.DecideProposal(ctx, id, store.ProposalApproved, until, by, now)
}

// Deny denies the pending proposal id, or withdraws it when it is an
// approval in force; store.ErrNotFound or store.ErrNotPending.
func (s *Service) Deny(ctx context.Context, id, by string) (store.Proposal, error) {
	return s.cfg.Store.DecideProposal(ctx, id, store.ProposalDenied, time.Time{}, by, s.cfg.Now())
}

// Get returns the proposal id, or store.ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (store.Proposal, error) {
	return s.cfg.Store.Proposal(ctx, id, s.cfg.Now())
}

// CheckState returns nil for a proposal state List takes ("" for any),
// else ErrBadState.
func CheckState(state string) error {
	switch state {
	case "", store.ProposalPending, store.ProposalApproved, store.ProposalDenied, store.ProposalExpired, store.ProposalUsed:
		return nil
	}
	return fmt.Errorf("state %q: %w", state, ErrBadState)
}

// MaxList bounds a List.
const MaxList = 500

// List returns box's proposals ("" for every box's) in state ("" for
// any), newest first, at most MaxList.
func (s *Service) List(ctx context.Context, box, state string) ([]store.Proposal, error) {
	if err := CheckState(state); err != nil {
		return nil, err
	}
	return s.cfg.Store.ListProposals(ctx, box, state, s.cfg.Now(), MaxList)
}

// SetAsk turns box's ask mode for scope on or off; ErrBadScope or
// ErrBadSecretName (CheckAsk), or store.ErrNotFound if no box.
func (s *Service) SetAsk(ctx context.Context, box, scope string, on bool) error {
	if err := CheckAsk(scope, on); err != nil {
		return err
	}
	return s.cfg.Store.SetAsk(ctx, box, scope, on)
}

// Asks returns the scopes box has in ask mode.
func (s *Service) Asks(ctx context.Context, box string) ([]string, error) {
	return s.cfg.Store.ListAsks(ctx, box)
}

// Words is what a refusal adds when v opened or joined a proposal, or
// found the box's proposals full: the proposal's ID and where to approve
// it. It is "" when the scope is not in ask mode.
func (s *Service) Words(v Verdict) string {
	switch {
	case v.Proposal.ID != "":
		w := fmt.Sprintf(" It waits for a person as proposal %s: approve it with `boxbroker approve %s --for 1h` (or deny it with `boxbroker deny %s`)", v.Proposal.ID, v.Proposal.ID, v.Proposal.ID)
		if s.cfg.PageURL != "" {
			w += " or on the owner's page at " + s.cfg.PageURL
		}
		return w + "; the same request succeeds once it is approved."
	case v.Denied.ID != "":
		return fmt.Sprintf(" A person denied the same request (proposal %s) at %s.", v.Denied.ID, v.Denied.DecidedAt.UTC().Format(time.RFC3339))
	case v.Full:
		return fmt.Sprintf(" The box already has %d proposals waiting for a person; this one was not recorded.", s.cfg.MaxPending)
	}
	return ""
}
