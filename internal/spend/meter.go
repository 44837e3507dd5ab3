// Package spend measures what boxes' model calls cost and holds them to
// monthly budgets.
//
// A Meter wraps the capabilities that make model calls — any
// capability.Metered: the Messages route of /llm/anthropic, and /decide —
// and the transport they call upstream through. Each capability reads its
// own requests, and tells the meter the model, the number of calls and
// their output bound (capability.Estimate); the meter decides when to read
// a request's body, and what to reserve and charge. Before a call is
// forwarded the wrapper reserves an upper bound of its cost against the
// budgets that apply — the box's, and its payer's principal's on that
// box — in one atomic conditional update in the store;
// a call that would pass a budget is refused with a 403 saying which budget
// is spent and when it resets. As the answer passes through, the transport
// reads the usage the upstream reports (from a JSON answer, or from a
// stream's message_start and message_delta events) without holding any
// byte back. When the call ends the reservation is released and the
// measured cost, priced by the price table, is charged and recorded by box,
// payer kind, principal, model and UTC month.
package spend

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// Defaults of Config.
const (
	// DefaultMaxTokens bounds the output of a call whose max_tokens the
	// broker did not read (a Messages body over inference.MaxRead).
	DefaultMaxTokens = 64_000
	// DefaultMaxBody is the input, in bytes, assumed for a body of
	// unknown length over what its capability reads: inference's own
	// bound.
	DefaultMaxBody = protocol.DefaultMaxBody
	// DefaultStaleAfter is a reservation's lease: Run renews the
	// reservations of this process's calls in flight every sixth of it,
	// and releases those of every process that no one renewed for that
	// long (a process that ended mid-call, or one cut off from the
	// store).
	DefaultStaleAfter = 2 * time.Minute
)

// BytesPerToken and OverheadTokens make the bound on a call's input
// tokens: its body's bytes divided by BytesPerToken, plus OverheadTokens
// for what the API adds (a tool-use system prompt, say), and no more
// than its model's context window (Bound). A byte-level tokenizer makes
// at most one token of each byte of text, and a JSON body holds its text
// in at least as many bytes (an escape is longer than what it stands
// for), so a token a byte bounds any body; a body's text only usually
// runs near four bytes a token (English and code; three on the
// tokenizers of Claude Opus 4.7 on), and digits set apart, whitespace
// runs, or rare Unicode run to one or two.
const (
	BytesPerToken  = 1
	OverheadTokens = 1024
)

// Config configures a Meter. Zero fields take the defaults above.
type Config struct {
	// Store keeps budgets, tallies, reservations and usage. Required.
	Store store.Spend
	// Boxes, when set, reads a box as the store holds it now: a call that
	// nothing bounds, refused where a budget of its box's name applies,
	// is refused as a removed box's (capability.TokenGone) instead when
	// the box of that name is no longer the one the call was admitted as
	// (removed, perhaps with another added under its name), so that it
	// is neither judged by nor told of the new box's budgets. Nil judges
	// it by the name alone.
	Boxes capability.BoxReader
	// Approvals, when set, lets a call past a budget through once when
	// an approval of that model and amount is in force, and opens a
	// proposal for one when the box's owner asks about its budget
	// (package approval). Nil refuses them all.
	Approvals *approval.Service
	// Settle, when set, is the store reservations are renewed and
	// released in (Store when nil): the same store, with the longer bound
	// of a write made beside requests rather than in one's path.
	Settle store.Spend
	// Outbox, when set, is where settlements are written (Settle when
	// nil): a call that reserved nothing (a box with no budget) is queued
	// there to be settled in a batch with others when it takes it, and
	// every other call is settled as it ends (package outbox).
	Outbox Outbox
	// Budgeted, when set, tells from memory whether a box (by its name
	// and CreatedAt, as its call was admitted) has any budget (the
	// cache's Budgeted): a call of a box with none makes no
	// reservation, so it reads nothing from the store before it is
	// forwarded, and its body — when its capability meters it unread
	// (a Messages body) — is forwarded as it comes, read as it passes.
	// Nil asks the store on every call. An error asks the store too.
	Budgeted func(ctx context.Context, box string, created time.Time) (bool, error)
	// Prices is the price table (nil: DefaultPrices).
	Prices *Prices
	// Metrics, when set, counts calls of models the table does not name
	// (boxbroker_unpriced_calls_total).
	Metrics *metrics.Metrics
	// Now is the clock months are told by (nil: time.Now).
	Now func() time.Time
	// Logger receives settlements that fail and stale reservations
	// released; never a credential.
	Logger *slog.Logger
	// MaxTokens bounds the output of a call whose max_tokens was not
	// read (capability.Estimate.Capped false).
	MaxTokens int64
	// MaxBody is the input bound, in bytes, of a body of unknown length
	// over what its capability reads.
	MaxBody int64
	// StaleAfter is the age past which Run releases a reservation.
	StaleAfter time.Duration
	// StoreClock, when set, reads the store's clock (a store shared by
	// replicas: PostgreSQL's), which MeasureClock measures at every round
	// of Run, for ClockSkew and a warning past MaxClockSkew. Leases do not
	// depend on it: the store stamps, renews and judges reservations by
	// its own clock, in its statements, so that a replica whose clock
	// runs ahead or behind, or steps between two measurements, neither
	// releases another's live reservations nor has its own released.
	StoreClock func(ctx context.Context) (time.Time, error)
	// Counter, when set, is told of each request's usage by model as it
	// settles (the broker's metrics); nil tells no one.
	Counter Counter
	// RateLimiter, when set, holds calls to token-rate limits.
	RateLimiter RateLimiter
	// Alerter, when set, is told of each box charged against a budget,
	// to give budget alerts.
	Alerter *Alerter
}

// Outbox keeps the settlements of calls until the store takes them: see
// outbox.Outbox.
type Outbox interface {
	// QueueCall adds the settlement of a call that reserved nothing to a
	// batch, and reports false when it takes none just now. ctx is the
	// call's: the outbox may hold st there until the call concludes, to
	// journal it with the call's audit entry.
	QueueCall(ctx context.Context, st store.Settlement) bool
	// Settle writes st now.
	Settle(ctx context.Context, st store.Settlement) error
}

// Meter measures model calls and holds them to budgets. It is safe for
// concurrent use.
type Meter struct {
	cfg Config
	log *slog.Logger

	// bufs holds buffers for reuse: a request body read as it is
	// forwarded, or a JSON answer, is kept in one while it passes.
	bufs bufPool
	// lastMonth is the month of the last call prepared (see month).
	lastMonth atomic.Pointer[monthName]
	// live is the reservations of calls in flight, which Run renews.
	liveMu sync.Mutex
	live   map[int64]struct{}
	// unpriced is the models calls used that the table does not name.
	unpriced unpricedSet
	// clock is the store's clock's offset from Now, as last measured.
	clock storeClock
}

// New returns a Meter, or an error when cfg has no store.
func New(cfg Config) (*Meter, error) {
	if cfg.Store == nil {
		return nil, errors.New("spend: no store")
	}
	if cfg.Prices == nil {
		cfg.Prices = DefaultPrices()
	}
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	defaults.Positive(&cfg.MaxTokens, DefaultMaxTokens)
	defaults.Positive(&cfg.MaxBody, DefaultMaxBody)
	defaults.Positive(&cfg.StaleAfter, DefaultStaleAfter)
	if cfg.Settle == nil {
		cfg.Settle = cfg.Store
	}
	return &Meter{cfg: cfg, log: cfg.Logger, live: map[int64]struct{}{}}, nil
}

// Prices is the Meter's price table.
func (m *Meter) Prices() *Prices { return m.cfg.Prices }

// Month is t's calendar month in UTC, written YYYY-MM.
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// Resets is when month's budgets reset: the first instant of the next
// month, UTC. It returns the zero time for a month not written YYYY-MM.
func Resets(month string) time.Time {
	t, err := time.Parse("2006-01", month)
	if err != nil {
		return time.Time{}
	}
	return t.AddDate(0, 1, 0)
}
