// Package operator is every action an operator takes on a broker, each
// written once as a method of Service: add, rotate, bind, pause, remove
// a box and set its consent. A method checks its names, applies the side
// rules (the owner's credential goes with its box), tells the cache what
// it touched and writes the audit row, whichever front end called it.
//
// The front ends are thin adapters over a Service: the CLI against a data
// directory (cmd/boxbroker), the admin API (package admin), the owner's
// page (package admin/ui), and the CLI against --admin-url, whose admin
// client (package admin/adminclient) satisfies the same Boxes interface
// as Service, so that each command is written once.
//
// A refusal is an *Error: a Code, which each front end maps to what it
// says (an HTTP status and type, or a CLI error), and a message for the
// operator that never holds a token or a value.
package operator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// Cache is what Service tells of its writes: the box-facing cache in the
// same process. Drop forgets what a write touched; Settle returns once a
// write is in force on every replica.
type Cache interface {
	Drop(kind, key string)
	Settle(ctx context.Context) error
}

// Config configures a Service.
type Config struct {
	// Store is where everything is kept. Required.
	Store store.Store
	// Keyring seals secrets. Nil: an action that seals refuses.
	Keyring *secrets.Keyring
	// Cache, when set, is told of each write. Nil: none (the CLI on a
	// data directory, whose running broker reads the store's change log).
	Cache Cache
	// Pool, when set, is the credential pool whose state and counts
	// PoolEntries shows (a running broker's). Nil: PoolEntries reads the
	// entries from the store, with no state or counts.
	Pool *pool.Pool
	// Logger receives what was done; never a token or a value. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Prices is the price table the broker charges by, which Prices
	// shows. Nil: the built-in table.
	Prices *spend.Prices
	// DeadLetters, when set, are the dead letters the dead-letter actions
	// act on: this replica's (an *outbox.Outbox), or a data directory's.
	// Nil: those actions refuse with NotImplemented.
	DeadLetters DeadLetters
}

// Origin is the front end an action came through, as its audit row names
// it: Method and Route (such as "POST" and "/api/boxes", or "CLI" and
// "box add"), and Status, the status its audit row records on success
// (0: the action's own, as the admin API answers it).
type Origin struct {
	Method string
	Route  string
	Status int
	// By, when set, is who acted as the front end knows them, added to
	// each audit row's message, such as " (by ann, operator)".
	By string
	// Decider, when set, is who a decision on a proposal names as its
	// maker, such as "admin:" and the admin token's ID; "" names the
	// front end ("cli", "admin").
	Decider string
	// ReadOnly, when true, is a front end's caller that may only read (a
	// viewer's admin token): a read that would otherwise write, as
	// ProxyCA making the CA the store lacks, refuses (Forbidden) instead.
	// The front end refuses such a caller every action that writes.
	ReadOnly bool
}

// Actions is every action a CLI command takes, as both a Service and the
// admin API's client (package adminclient) take them: the CLI picks one
// of the two once and writes each command over it. An ID of a dead
// letter may be a prefix of one letter's ID only.
type Actions interface {
	Boxes

	IssueGrant(ctx context.Context, box string, ng NewGrant) (IssuedGrant, error)
	ListGrants(ctx context.Context, box string) ([]GrantView, error)
	RevokeGrant(ctx context.Context, id string) error

	ListResources(ctx context.Context, box string) ([]ResourceView, error)
	AddResource(ctx context.Context, box string, nr NewResource) (ResourceView, error)
	RemoveResource(ctx context.Context, box, kind, id string) error

	ListSecrets(ctx context.Context, box string) ([]SecretView, error)
	SetSecret(ctx context.Context, box, name string, sv SecretValue) (SecretView, error)
	SetSecretRules(ctx context.Context, box, name string, rules []string, rate string) (SecretView, error)
	RemoveSecret(ctx context.Context, box, name string) error

	ListVisitors(ctx context.Context) ([]VisitorView, error)
	SetVisitor(ctx context.Context, principal, kind string, value []byte) (VisitorView, error)
	RemoveVisitor(ctx context.Context, principal string) error

	SetPayer(ctx context.Context, box string, ps PayerSetting) (PayerView, error)

	ListCredentials(ctx context.Context) ([]CredentialView, error)
	SetCredential(ctx context.Context, id, kind string, value []byte) (CredentialView, error)
	RemoveCredential(ctx context.Context, id string) error

	// Budgets lists a box's monthly budgets and where they stand in a month.
	Budgets(ctx context.Context, box, month string) (BudgetList, error)
	// SetBudget sets a box's own budget or a principal's on it.
	SetBudget(ctx context.Context, box string, set BudgetSetting) (BudgetView, error)
	// RemoveBudget removes one; principal "" is the box's own.
	RemoveBudget(ctx context.Context, box, principal string) error

	// WindowBudgets lists a box's budgets over a window other than the
	// calendar month (a day, a week, or a rolling N days) and where they
	// stand.
	WindowBudgets(ctx context.Context, box string) ([]WindowBudgetView, error)
	// SetWindowBudget sets one and returns the box's window budgets.
	SetWindowBudget(ctx context.Context, box string, set WindowBudgetSetting) ([]WindowBudgetView, error)
	// RemoveWindowBudget removes one; principal "" is the box's own.
	RemoveWindowBudget(ctx context.Context, box, principal, window string) error

	// RateLimits lists a box's token-rate limits: its own and one per
	// principal who pays for its calls.
	RateLimits(ctx context.Context, box string) ([]RateLimitView, error)
	// SetRateLimit sets a box's own rate limit or a principal's on it.
	SetRateLimit(ctx context.Context, box string, set RateLimitView) (RateLimitView, error)
	// RemoveRateLimit removes one; principal "" is the box's own.
	RemoveRateLimit(ctx context.Context, box, principal string) error

	// Spend returns a box's spend in a month (YYYY-MM; "" for this
	// month), measured beside reported, with its prompt-cache use.
	Spend(ctx context.Context, box, month string) (SpendReport, error)

	// PoolEntries lists the credential pool's entries, never a value.
	PoolEntries(ctx context.Context) ([]PoolEntryView, error)
	// SetPoolEntry seals value, of kind, as the entry name, with its
	// weight (0 for 1) and base URL ("" for the broker's).
	SetPoolEntry(ctx context.Context, name, kind string, weight int, baseURL string, value []byte) (PoolEntryView, error)
	// RemovePoolEntry removes the entry name.
	RemovePoolEntry(ctx context.Context, name string) error

	// ListProposals lists box's proposals ("" for every box's) in state
	// ("" for any), newest first.
	ListProposals(ctx context.Context, box, state string) ([]ProposalView, error)
	// ApproveProposal approves a pending proposal for forWords ("15m",
	// "1h", "7d", "always"; "" is an hour).
	ApproveProposal(ctx context.Context, id, forWords string) (ProposalView, error)
	// DenyProposal denies a pending proposal.
	DenyProposal(ctx context.Context, id string) (ProposalView, error)
	// SetAsk turns a box's ask mode for scope on or off and returns the
	// box's scopes in ask mode.
	SetAsk(ctx context.Context, box, scope string, on bool) ([]string, error)
	// Asks returns the box's scopes in ask mode.
	Asks(ctx context.Context, box string) ([]string, error)

	// ListDeadLetters lists the dead letters, oldest first.
	ListDeadLetters(ctx context.Context) ([]DeadLetterView, error)
	// RetryDeadLetter applies one to the store now; it is removed once
	// the store takes it.
	RetryDeadLetter(ctx context.Context, id string) (DeadLetterView, error)
	// DropDeadLetter removes one, giving up its records.
	DropDeadLetter(ctx context.Context, id string) error

	ProxyCA(ctx context.Context) (ProxyCAView, error)
	RotateProxyCA(ctx context.Context, grace time.Duration) (ProxyCARotation, error)

	Prices(ctx context.Context) (PriceTable, error)

	// ListAudit lists the audit entries q selects, newest first.
	ListAudit(ctx context.Context, q store.AuditQuery) ([]AuditView, error)
}

var _ Actions = (*Service)(nil)

// Service is the operator's actions over a store. Its zero value is not
// usable; New makes one. A Service is safe for concurrent use.
type Service struct {
	cfg    Config
	origin Origin
}

// New returns a Service over cfg, with its defaults applied, whose audit
// rows name no origin until Via gives one; an error if cfg has no store.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("operator config: no store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg}, nil
}

// Via returns a Service whose audit rows name o as where each action
// came from.
func (s *Service) Via(o Origin) *Service {
	c := *s
	c.origin = o
	return &c
}

// Store is the store the Service acts on.
func (s *Service) Store() store.Store { return s.cfg.Store }

// Now is the Service's clock.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// Drop tells the cache, when there is one, what a write touched.
func (s *Service) Drop(kind, key string) {
	if s.cfg.Cache != nil {
		s.cfg.Cache.Drop(kind, key)
	}
}

// Changed tells the cache what a write of something the box-facing side
// caches touched, and returns once the write is in force on every replica
// (at once on SQLite, after the staleness bound with a shared store), so
// that an action's success means the box's next request is judged by it.
func (s *Service) Changed(ctx context.Context, kind, key string) error {
	if s.cfg.Cache == nil {
		return nil
	}
	s.cfg.Cache.Drop(kind, key)
	if err := s.cfg.Cache.Settle(ctx); err != nil {
		return fmt.Errorf("wait for every replica to see a %s change: %w", kind, err)
	}
	return nil
}

// Audit records an action on box in the audit log, through s's origin:
// an entry whose Capability is store.ActorAdmin, whose status is the
// origin's (status when the origin names none), and whose message says
// what was done (never a token or a value).
func (s *Service) Audit(ctx context.Context, box string, status int, message string) error {
	if s.origin.Status != 0 {
		status = s.origin.Status
	}
	e := store.AuditEntry{Box: box, At: s.cfg.Now().UTC(), Method: s.origin.Method, Route: s.origin.Route,
		Capability: store.ActorAdmin, Status: status, Message: message + s.origin.By}
	if err := s.cfg.Store.AddAudit(ctx, []store.AuditEntry{e}); err != nil {
		return fmt.Errorf("audit %q on box %s: %w", s.origin.Route, box, err)
	}
	return nil
}

// wrote ends an action whose write the store took: Changed of kind and
// key, then done.
func (s *Service) wrote(ctx context.Context, kind, key, box string, status int, message string, attrs ...any) error {
	if err := s.Changed(ctx, kind, key); err != nil {
		return err
	}
	return s.done(ctx, box, status, message, attrs...)
}

// done logs an action and writes its audit row.
func (s *Service) done(ctx context.Context, box string, status int, message string, attrs ...any) error {
	s.cfg.Logger.Info("operator: "+message, append([]any{"box", box, "via", s.origin.Method + " " + s.origin.Route}, attrs...)...)
	return s.Audit(ctx, box, status, message)
}
