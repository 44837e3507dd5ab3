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
	DefaultMaxBody = 64 << 20
	// DefaultStaleAfter is a reservation's lease: Run renews the
	// reservations of this process's calls in flight every sixth of it,
	// and releases those of every process that no one renewed for that
	// long (a process that ended mid-call, or one cut off from the
	// store).
	DefaultStaleAfter = 2 * time.Minute
	// DefaultBatchEvery is how often a server settles, in batches, the
	// calls that reserved nothing.
	DefaultBatchEvery = 100 * time.Millisecond
)

// BytesPerToken and OverheadTokens make the bound on a call's input
// tokens: its body's bytes divided by BytesPerToken, plus OverheadTokens
// for what the API adds (a tool-use system prompt, say). English text and
// code run near four bytes a token, so a third errs high; images and
// documents, sent as base64, err far higher.
const (
	BytesPerToken  = 3
	OverheadTokens = 1024
)

// Config configures a Meter. Zero fields take the defaults above.
type Config struct {
	// Store keeps budgets, tallies, reservations and usage. Required.
	Store store.Spend
	// Settle, when set, is where settlements are written (Store when
	// nil): the same store, with the longer bound of a write made beside
	// requests rather than in one's path. When it is also a
	// store.Spooled, each settlement is written under a key of its own,
	// so that one spooled after a write whose outcome is unknown (its
	// deadline passed) is applied once however the write ended.
	Settle store.Spend
	// Spill, when set, keeps a settlement the store did not take (the
	// spool), under its key, to be applied later.
	Spill func(key string, s store.Settlement) error
	// Budgeted, when set, tells from memory whether a box has any budget
	// (the cache's Budgeted): a call of a box with none makes no
	// reservation, so it reads nothing from the store before it is
	// forwarded, and its body — when its capability meters it unread
	// (a Messages body) — is forwarded as it comes, read as it passes.
	// Nil asks the store on every call. An error asks the store too.
	Budgeted func(ctx context.Context, box string) (bool, error)
	// BatchEvery, when above zero and while RunBatches runs, settles the
	// calls that reserved nothing (a box with no budget) in batches: every
	// BatchEvery, one store transaction per box, principal and month,
	// rather than one per call. A call that made a reservation always
	// settles as it ends, and so does every call when BatchEvery is zero
	// or RunBatches is not running.
	BatchEvery time.Duration
	// Prices is the price table (nil: DefaultPrices).
	Prices *Prices
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
	// Journal, when set, takes each call settled in a batch as the call
	// ends, before its answer is complete, and is told of each batch
	// before it goes to the store and once the store or Spill took it
	// (package journal), so that a replica killed before a batch is
	// written loses none of its calls. Settlements are then written
	// under keys (Settle must be a store.Spooled).
	Journal Journal
}

// Journal keeps the settlements of calls batched until they are written:
// see journal.Journal.
type Journal interface {
	Settle(st store.Settlement) (uint64, error)
	Begin(key string, of []uint64) error
	Done(key string)
}

// Meter measures model calls and holds them to budgets. It is safe for
// concurrent use.
type Meter struct {
	cfg Config
	log *slog.Logger

	batching atomic.Bool // RunBatches is running; changed with mu held
	mu       sync.Mutex  // guards pending and seqs
	pending  map[batchKey]*store.Settlement
	// seqs are the journal's numbers of the calls in each pending
	// settlement.
	seqs map[batchKey][]uint64

	// bufs holds buffers for reuse: a request body read as it is
	// forwarded, or a JSON answer, is kept in one while it passes.
	bufs bufPool
	// lastMonth is the month of the last call prepared (see month).
	lastMonth atomic.Pointer[monthName]
	// live is the reservations of calls in flight, which Run renews.
	liveMu sync.Mutex
	live   map[int64]struct{}
}

// batchKey is what one batched settlement charges.
type batchKey struct{ box, principal, month string }

// New returns a Meter, or an error when cfg has no store.
func New(cfg Config) (*Meter, error) {
	if cfg.Store == nil {
		return nil, errors.New("spend: no store")
	}
	if cfg.Prices == nil {
		cfg.Prices = DefaultPrices()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Settle == nil {
		cfg.Settle = cfg.Store
	}
	return &Meter{cfg: cfg, log: cfg.Logger, pending: map[batchKey]*store.Settlement{}, seqs: map[batchKey][]uint64{}, live: map[int64]struct{}{}}, nil
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
