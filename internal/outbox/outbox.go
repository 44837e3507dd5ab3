// Package outbox keeps the records of the calls a replica answers — their
// audit entries and their settlements — until the store has taken them,
// and loses none of them on the way: not while the store refuses writes,
// and not when the replica is killed with -9.
//
// A call's records go through five steps, each in this package:
//
//   - queue: an audit entry goes on the Writer's bounded queue (Add never
//     blocks), and the settlement of a call that reserved nothing on the
//     batch of its box, principal and month (QueueCall);
//   - journal: both are appended to the replica's Journal as the call
//     completes, before the box has the end of its answer, as one record
//     when the call has both (a Call holds the settlement until the
//     audit entry comes: RecordCall), or alone (RecordCall, QueueCall);
//   - batch: the Writer writes entries to the store in batches, and
//     RunBatches settlements, each batch under a key of its own
//     (store.Spooled), named in the journal before it goes and marked
//     done once it is taken;
//   - spool: a batch the store does not take is appended, under its key,
//     to the Spool, synced to the disk;
//   - replay: the spool is replayed into the store (Replay, RunReplay),
//     and then the journal's batches that neither the store nor the spool
//     took are handed on again (Journal.Retry); what a journal of a
//     replica that is gone holds is handed to the spool when the Outbox
//     is opened; the store applies each key once.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// Store is where the outbox writes: the audit log, and batches under
// their keys. Both stores are one.
type Store interface {
	store.Audit
	store.Spooled
}

// within is ctx bounding store calls by d (package deadline's Within),
// or ctx itself when d is zero.
func within(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return deadline.Within(ctx, d)
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
	// Store is where batches are written. Required.
	Store Store
	// Bound, when above zero, bounds each of the Outbox's store writes
	// (package deadline's Within) in place of the store's own bound on
	// a request's calls: a write made beside requests may take longer
	// than a request's reads. Its audit Writer takes it too.
	Bound time.Duration
	// Identity is Store's identity (store.Store's Identity): the journal
	// and the spool name it, and Open and Replay refuse records that name
	// another. "": records are named by no store, and none is refused.
	Identity string
	// Audit tunes the audit log's Writer; its Spool and Journal are the
	// Outbox's own.
	Audit AuditOptions
	// BatchEvery, when above zero and while RunBatches runs, settles the
	// calls queued with QueueCall every BatchEvery, one store transaction per
	// box, principal and month. Zero: QueueCall queues nothing.
	BatchEvery time.Duration
	// Metrics counts audit entries written, dropped and lost (nil: none).
	Metrics *metrics.Metrics
	// Logger receives what could not be written (default
	// slog.Default()); never a credential.
	Logger *slog.Logger

	// spoolMax bounds the spool, in bytes (DefaultSpoolMax when zero):
	// set by tests.
	spoolMax int64
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
	// flushing is held by a Flush from taking the pending batch until
	// it is settled, so that a Flush returns only once the calls a
	// concurrent one took are settled too.
	flushing sync.Mutex
}

// Open opens the spool and the journal in cfg.Dir, handing what an
// earlier process left in a journal to the spool first (to the store,
// under its batch's key, when the spool is full). It returns an
// error when cfg has no store, or when either cannot be opened, and a
// *ForeignError, changing nothing, when the directory holds records of
// another store than cfg.Identity.
func Open(cfg Config) (*Outbox, error) {
	if cfg.Store == nil {
		return nil, errors.New("outbox: no store")
	}
	defaults.Logger(&cfg.Logger)
	if err := checkStore(cfg.Dir, cfg.Identity); err != nil {
		return nil, err
	}
	sp, err := OpenSpool(cfg.Dir, cfg.spoolMax, cfg.Identity, cfg.Logger)
	if err != nil {
		return nil, err
	}
	sp.metrics = cfg.Metrics
	// What a journal holds goes to the spool, replayed once the broker
	// runs; with the spool full (the store was down for longer than it
	// holds), to the store itself, under the batch's key, which applies
	// it once: nothing replays the spool before the broker runs.
	put := func(b Batch) error {
		err := sp.Append(b)
		if !errors.Is(err, ErrFull) {
			return err
		}
		ctx := within(context.Background(), cfg.Bound)
		aerr := b.applyTo(ctx, cfg.Store, cfg.Metrics)
		if Refused(aerr) {
			aerr = refusedBatch(ctx, cfg.Store, sp, b, aerr)
		}
		if aerr != nil {
			return errors.Join(err, aerr)
		}
		return nil
	}
	jr, err := OpenJournal(cfg.Dir, 0, cfg.Identity, cfg.Logger, put)
	if err != nil {
		sp.Close()
		return nil, err
	}
	ao := cfg.Audit
	ao.Spool, ao.Journal, ao.Logger, ao.Metrics, ao.Bound = sp, jr, cfg.Logger, cfg.Metrics, cfg.Bound
	return &Outbox{Spool: sp, Journal: jr, Audit: NewWriter(cfg.Store, ao), cfg: cfg, log: cfg.Logger,
		pending: map[batchKey]*store.Settlement{}, seqs: map[batchKey][]uint64{}}, nil
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
// and then hands on again the journal's batches that neither the store
// nor the spool took (Journal.Retry: to the store, or the spool when the
// store does not take them), and says how many batches it applied or
// handed on. A replay already running is
// waited for. A batch the store refuses for good is set aside (see
// refusedBatch), and the replay goes on. It stops, keeping it, at a batch
// that names another store (a *ForeignError), or that the store does not
// answer for.
func (o *Outbox) Replay(ctx context.Context) (int, error) {
	n, err := o.replaySpool(ctx)
	if err != nil {
		return n, err
	}
	m, err := o.Journal.Retry(func(b Batch) error {
		err := b.applyTo(within(ctx, o.cfg.Bound), o.cfg.Store, o.cfg.Metrics)
		if err == nil {
			return nil
		}
		if kept, err := o.Spool.keep(within(ctx, o.cfg.Bound), o.cfg.Store, b, err); !kept {
			return err
		}
		return nil
	})
	return n + m, err
}

// replaySpool is Replay's replay of the spool.
func (o *Outbox) replaySpool(ctx context.Context) (int, error) {
	return o.Spool.Replay(ctx, func(ctx context.Context, b Batch) error {
		// A batch of another store (appended by a replica of it sharing
		// the directory) is kept, with every batch after it.
		err := b.apply(within(ctx, o.cfg.Bound), o.cfg.Store, o.cfg.Metrics, o.cfg.Dir, SpoolReplayFile, o.cfg.Identity)
		if Refused(err) {
			// Refused for good: set aside, one bad record alone.
			if err := refusedBatch(within(ctx, o.cfg.Bound), o.cfg.Store, o.Spool, b, err); err != nil {
				return err
			}
			return errSetAside
		}
		return err
	})
}

// ListDead returns the batches the store refused for good, set aside in
// the data directory (see DeadFile), oldest first.
func (o *Outbox) ListDead() ([]Dead, error) { return ListDead(o.cfg.Dir) }

// RetryDead applies the dead letter id (its ID, or a prefix of one ID
// only) to the store, and removes it once the store took it: see
// RetryDead.
func (o *Outbox) RetryDead(ctx context.Context, id string) (Dead, error) {
	return retryDead(within(ctx, o.cfg.Bound), o.cfg.Dir, o.cfg.Store, o.cfg.Metrics, o.cfg.Identity, id)
}

// DropDead removes the dead letter id, giving up its records: see
// DropDead.
func (o *Outbox) DropDead(id string) (Dead, error) {
	d, err := DropDead(o.cfg.Dir, id)
	if err == nil {
		o.log.Warn("spool: a dead letter is dropped; its records are given up", "id", d.ID,
			"settlements", len(d.Batch.Settle), "audit_entries", len(d.Batch.Audit))
	}
	return d, err
}

// RunReplay replays the spool at once and then every ReplayEvery while
// it, or the journal's batches that neither took, hold anything, until
// ctx ends.
func (o *Outbox) RunReplay(ctx context.Context) {
	t := time.NewTicker(ReplayEvery)
	defer t.Stop()
	failing := false
	for {
		if o.Spool.Size() > 0 || o.Journal.Failing() > 0 {
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
// done is recovered at the next Open. Audit entries still queued (added
// once the Writer's Run had returned: a call ending after the audit log
// stopped) are logged as not written, at ERROR: the journaled ones among
// them are recovered at the next Open, the others are lost.
func (o *Outbox) Close() error {
	if n := len(o.Audit.queue); n > 0 {
		o.log.Error("audit: entries queued after the audit log stopped are not written; those the journal holds are recovered at the next start", "entries", n)
	}
	return errors.Join(o.Journal.Close(), o.Spool.Close())
}

// ForeignError is what Open returns, changing nothing, when the data
// directory holds a journal or a spool of another store, and what Replay
// returns at a spooled batch of another store: the records of one store
// are replayed into no other.
type ForeignError struct {
	// Dir is the data directory, and Files the journals and spool files
	// in it that name the other store.
	Dir   string
	Files []string
	// Theirs is the identity of the store the records belong to, and Ours
	// that of the store this broker serves.
	Theirs, Ours string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("the data directory %s holds the records of calls answered for another store (identity %s), in %s; "+
		"this broker's store is %s, and records are never replayed into another store. "+
		"Serve with the store they belong to so that they are applied, or move those files out of the data directory",
		e.Dir, e.Theirs, strings.Join(e.Files, ", "), e.Ours)
}

// checkStore returns a *ForeignError when dir holds a journal whose
// replica is gone, or a spool file, that names another store than id. A
// journal locked by its running replica is that replica's to name.
func checkStore(dir, id string) error {
	if id == "" {
		return nil
	}
	e := &ForeignError{Dir: dir, Ours: id}
	note := func(p, theirs string) {
		if theirs == "" || theirs == id {
			return
		}
		if e.Theirs == "" {
			e.Theirs = theirs
		}
		e.Files = append(e.Files, p)
	}
	err := eachGone(dir, JournalPattern, func(p string, f *os.File) error {
		theirs, err := journalStore(f)
		note(p, theirs)
		return err
	})
	if err != nil {
		return err
	}
	for _, name := range []string{SpoolReplayFile, SpoolFile} {
		p := filepath.Join(dir, name)
		theirs, err := spoolStore(p, id)
		if err != nil {
			return err
		}
		note(p, theirs)
	}
	if len(e.Files) > 0 {
		return e
	}
	return nil
}

// journalStore is the store the journal f names in its header, or ""
// when it names none. At most MaxLine bytes of its first line are read.
func journalStore(f *os.File) (string, error) {
	var first []byte
	err := eachLine(f, func(_ int64, line []byte) error {
		first = line
		return errFirstLine
	}, func(int64, int64) error { return errFirstLine })
	if err != nil && !errors.Is(err, errFirstLine) {
		return "", fmt.Errorf("journal: %w", err)
	}
	var l journalLine
	if json.Unmarshal(first, &l) != nil {
		return "", nil // no header: a journal cut off as it began
	}
	return l.Store, nil
}

// errFirstLine ends a read at its first line.
var errFirstLine = errors.New("first line read")

// spoolStore is the first store other than id a batch in the spool file
// at p names, or "" when there is none (or no file). The file is read a
// line at a time (eachLine); a line longer than MaxLine names none.
func spoolStore(p, id string) (string, error) {
	f, err := filelock.Open(p, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	var theirs string
	err = eachLine(f, func(_ int64, line []byte) error {
		var b struct {
			Store string `json:"store"`
		}
		if json.Unmarshal(line, &b) == nil && b.Store != "" && b.Store != id {
			theirs = b.Store
			return errFirstLine
		}
		return nil
	}, func(int64, int64) error { return nil })
	if err != nil && !errors.Is(err, errFirstLine) {
		return "", fmt.Errorf("spool: %w", err)
	}
	return theirs, nil
}
