// Package outbox keeps the records of the calls a replica answers — their
// audit entries and their settlements — until the store has taken them,
// and loses none of them on the way: not while the store refuses writes,
// and not when the replica is killed with -9.
//
// A call's records go through five steps, each in this package:
//
//   - queue: an audit entry goes on the Writer's bounded queue (Add never
//     blocks), and the settlement of a call that reserved nothing on the
//     batch of its box, principal and month (Queue);
//   - journal: both are appended to the replica's Journal as the call
//     completes, before the box has the end of its answer (Record, Queue);
//   - batch: the Writer writes entries to the store in batches, and
//     RunBatches settlements, each batch under a key of its own
//     (store.Spooled), named in the journal before it goes and marked
//     done once it is taken;
//   - spool: a batch the store does not take is appended, under its key,
//     to the Spool, synced to the disk;
//   - replay: the spool is replayed into the store (Replay, RunReplay),
//     and what a journal of a replica that is gone holds is handed to the
//     spool when the Outbox is opened; the store applies each key once.
package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/store"
)

// Store is where the outbox writes: the audit log, and batches under
// their keys. Both stores are one.
type Store interface {
	store.Audit
	store.Spooled
}

// DefaultBatchEvery is how often RunBatches settles, in batches, the
// calls that reserved nothing.
const DefaultBatchEvery = 100 * time.Millisecond

// ReplayEvery is how often RunReplay replays the spool while it holds
// anything: a store that answers again takes what waits within a second.
const ReplayEvery = time.Second

// Config configures an Outbox.
type Config struct {
	// Dir is the data directory the journal and the spool are kept in
	// (made, mode 0700, if missing). Required.
	Dir string
	// Store is where batches are written, with the bound of a write made
	// beside requests. Required.
	Store Store
	// Audit tunes the audit log's Writer; its Spool and Journal are the
	// Outbox's own.
	Audit AuditOptions
	// BatchEvery, when above zero and while RunBatches runs, settles the
	// calls queued with Queue every BatchEvery, one store transaction per
	// box, principal and month. Zero: Queue queues nothing.
	BatchEvery time.Duration
	// Metrics counts audit entries written, dropped and lost (nil: none).
	Metrics *metrics.Metrics
	// Logger receives what could not be written (default
	// slog.Default()); never a credential.
	Logger *slog.Logger
}

// Outbox is one replica's outbox. Its methods are safe for concurrent
// use.
type Outbox struct {
	// Spool keeps the batches the store did not take.
	Spool *Spool
	// Journal keeps the records of calls answered until the store or the
	// spool takes them.
	Journal *Journal
	// Audit writes the audit log.
	Audit *Writer

	cfg Config
	log *slog.Logger

	batching atomic.Bool // RunBatches is running; changed with mu held
	mu       sync.Mutex  // guards pending and seqs
	pending  map[batchKey]*store.Settlement
	// seqs are the journal's numbers of the calls in each pending
	// settlement.
	seqs map[batchKey][]uint64
}

// Open opens the spool and the journal in cfg.Dir, handing what an
// earlier process left in a journal to the spool first. It returns an
// error when cfg has no store, or when either cannot be opened.
func Open(cfg Config) (*Outbox, error) {
	if cfg.Store == nil {
		return nil, errors.New("outbox: no store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	sp, err := OpenSpool(cfg.Dir, 0, cfg.Logger)
	if err != nil {
		return nil, err
	}
	jr, _, err := OpenJournal(cfg.Dir, 0, cfg.Logger, sp.Append)
	if err != nil {
		sp.Close()
		return nil, err
	}
	ao := cfg.Audit
	ao.Spool, ao.Journal, ao.Logger, ao.Metrics = sp, jr, cfg.Logger, cfg.Metrics
	return &Outbox{Spool: sp, Journal: jr, Audit: NewWriter(cfg.Store, ao), cfg: cfg, log: cfg.Logger,
		pending: map[batchKey]*store.Settlement{}, seqs: map[batchKey][]uint64{}}, nil
}

// Record journals e, the audit entry of a call answered, and queues it
// to be written, before the box has the end of its answer. A journal
// that cannot write says so in Err; an entry dropped from a full queue is
// counted, and forgotten by the journal.
func (o *Outbox) Record(e store.AuditEntry) {
	seq, _ := o.Journal.Audit(e)
	if !o.Audit.AddJournaled(e, seq) {
		o.Journal.Forget(seq)
	}
}

// Add queues e, an audit entry no call's answer waits for (a mint's, a
// tally of refusals), unjournaled: see Writer.Add.
func (o *Outbox) Add(e store.AuditEntry) bool { return o.Audit.Add(e) }

// Err is nil while the outbox records: it returns ErrCannotRecord while
// the last audit batch was taken neither by the store nor by the spool,
// and the journal's last failure while it cannot write.
func (o *Outbox) Err() error {
	return errors.Join(o.Audit.Recording(), o.Journal.Err())
}

// Replay applies what the spool holds to the store now, each batch once,
// and says how many batches it applied. A replay already running is
// waited for.
func (o *Outbox) Replay(ctx context.Context) (int, error) {
	return o.Spool.Replay(ctx, func(ctx context.Context, b Batch) error {
		_, err := o.cfg.Store.ApplySpooled(ctx, b.Key, b.Settle, b.Audit)
		return err
	})
}

// RunReplay replays the spool at once and then every ReplayEvery while
// it holds anything, until ctx ends.
func (o *Outbox) RunReplay(ctx context.Context) {
	t := time.NewTicker(ReplayEvery)
	defer t.Stop()
	failing := false
	for {
		if o.Spool.Size() > 0 {
			n, err := o.Replay(ctx)
			switch {
			case err != nil && !failing && ctx.Err() == nil:
				o.log.Warn("spool: replay stopped; it resumes when the store answers", "applied", n, "err", err)
				failing = true
			case err == nil:
				if n > 0 {
					o.log.Info("spool: replayed", "batches", n)
				}
				failing = false
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close closes the journal and the spool. What the journal holds not yet
// done is recovered at the next Open.
func (o *Outbox) Close() error {
	return errors.Join(o.Journal.Close(), o.Spool.Close())
}
