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
	// maker (Service.DecidedBy), such as "admin:" and the admin token's
	// ID; "" names the front end ("cli", "admin").
	Decider string
	// ReadOnly, when true, is a front end's caller that may only read (a
	// viewer's admin token): a read that would otherwise write, as
	// ProxyCA making the CA the store lacks, refuses (Forbidden) instead.
	// The front end refuses such a caller every action that writes.
	ReadOnly bool
}

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

// done logs an action and writes its audit row.
func (s *Service) done(ctx context.Context, box string, status int, message string, attrs ...any) error {
	s.cfg.Logger.Info("operator: "+message, append([]any{"box", box, "via", s.origin.Method + " " + s.origin.Route}, attrs...)...)
	return s.Audit(ctx, box, status, message)
}
