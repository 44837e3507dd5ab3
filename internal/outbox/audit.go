// A Writer writes the audit log — every refusal and every request
// served for a box — to the store without making a request wait for it:
// Add puts an entry on a bounded queue and never blocks, dropping (and
// counting) the entry when the queue is full; Run writes the queue in
// batches and prunes entries older than the retention.

package outbox

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// Defaults for AuditOptions.
const (
	DefaultQueue      = 8192
	DefaultBatch      = 256
	DefaultRetention  = 30 * 24 * time.Hour
	DefaultPruneEvery = time.Hour
	// drainFor bounds the writing of what is queued once Run's context ends.
	drainFor = 5 * time.Second
)

// AuditOptions tune a Writer. Zero values take the defaults.
type AuditOptions struct {
	// Queue bounds the entries waiting to be written.
	Queue int
	// Batch bounds the entries written in one transaction.
	Batch int
	// Linger, when above zero, is how long a batch waits for more entries
	// before it is written, unless it fills or a Sync comes first: fewer,
	// larger transactions, each entry stored at most Linger later. Zero
	// writes what is queued at once.
	Linger time.Duration
	// Retention is how long entries are kept.
	Retention time.Duration
	// PruneEvery is how often entries past Retention are pruned.
	PruneEvery time.Duration
	// Metrics counts entries written, dropped and lost (nil: none).
	Metrics *metrics.Metrics
	// Logger receives write failures (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Bound, when above zero, bounds each of the Writer's store writes
	// (package deadline's Within) in place of the store's own.
	Bound time.Duration
	// Spool, when set, keeps a batch the store did not take, under its
	// key, to be written later. A batch neither takes is lost, and
	// counted.
	Spool *Spool
	// Journal, when set, is told of each batch holding entries added with
	// AddJournaled before it goes to the store, and once the store or
	// the spool took it. The batch is then written under its key
	// (store.Spooled), so that a batch journaled and written before a
	// crash is not written again when the journal is recovered.
	Journal *Journal
}

// item is an entry to write, or (when sync is not nil) a marker closed
// once everything queued before it is written.
type item struct {
	entry store.AuditEntry
	sync  chan struct{}
	seq   uint64 // its number in the journal; 0 when not journaled
}

// Writer writes audit entries asynchronously. Its methods are safe for
// concurrent use; Run must be running for entries to reach the store.
type Writer struct {
	st    Store
	opt   AuditOptions
	log   *slog.Logger
	queue chan item
	// full is how many queued entries make a batch that need not linger
	// (Batch, less the one Run holds, at most the queue's capacity).
	full int
	// wake ends a lingering batch's wait: Add sends on it once the queue
	// holds full entries (when Linger is set) and Sync once its marker is
	// queued. It holds one
	// signal, so that neither blocks; a signal left from before a batch
	// began only ends that batch's wait early. While a batch lingers, Run
	// takes nothing from the queue, so that an Add does not wake it.
	wake    chan struct{}
	dropped atomic.Int64
	// lost is set while the last batch written was taken neither by the
	// store nor by the spool, and cleared by the next one taken.
	lost atomic.Bool
	// entries is the batch being written, and seqs their numbers in
	// the journal; only Run uses them.
	entries []store.AuditEntry
	seqs    []uint64 // one an entry: 0 for one not journaled
}

// NewWriter returns a Writer over st.
func NewWriter(st Store, opt AuditOptions) *Writer {
	defaults.Positive(&opt.Queue, DefaultQueue)
	defaults.Positive(&opt.Batch, DefaultBatch)
	defaults.Positive(&opt.Retention, DefaultRetention)
	defaults.Positive(&opt.PruneEvery, DefaultPruneEvery)
	defaults.Logger(&opt.Logger)
	defaults.Clock(&opt.Now)
	return &Writer{st: st, opt: opt, log: opt.Logger, queue: make(chan item, opt.Queue),
		full: max(1, min(opt.Batch-1, opt.Queue)), wake: make(chan struct{}, 1)}
}

// Add queues e to be written and reports whether it was queued. It never
// blocks: when the queue is full, e is dropped and counted.
func (w *Writer) Add(e store.AuditEntry) bool { return w.AddJournaled(e, 0) }

// AddJournaled is Add for an entry the journal holds as record seq: the
// batch that holds it is begun and done in AuditOptions.Journal.
//
// Every entry is scrubbed as it is queued (see Scrub), whoever made it.
func (w *Writer) AddJournaled(e store.AuditEntry, seq uint64) bool {
	Scrub(&e)
	select {
	case w.queue <- item{entry: e, seq: seq}:
		if w.opt.Linger > 0 && len(w.queue) >= w.full {
			w.poke()
		}
		return true
	default:
		w.dropped.Add(1)
		w.opt.Metrics.AuditDropped()
		return false
	}
}

// poke ends a lingering batch's wait, or the next one's.
func (w *Writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Dropped is how many entries Add has dropped.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Sync waits until every entry queued before it has been written (or
// failed to be), or until ctx ends.
func (w *Writer) Sync(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case w.queue <- item{sync: done}:
		w.poke()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run writes queued entries and prunes old ones until ctx ends; then it
// writes what is still queued, for at most a few seconds, and returns.
func (w *Writer) Run(ctx context.Context) {
	w.prune(ctx)
	tick := time.NewTicker(w.opt.PruneEvery)
	defer tick.Stop()
	for {
		select {
		case it := <-w.queue:
			// Entries taken from the queue are written even if shutdown
			// begins meanwhile: the write is bounded, not cancelled.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainFor)
			w.batch(wctx, it, true)
			cancel()
		case <-tick.C:
			w.prune(ctx)
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainFor)
			defer cancel()
			for {
				select {
				case it := <-w.queue:
					w.batch(dctx, it, false)
				default:
					return
				}
			}
		}
	}
}

// batch writes first and whatever else is queued, up to Batch entries a
// transaction, and releases the sync markers among them once the entries
// before each are written. When linger is true and Linger is set, it
// first waits, up to Linger, for a full batch or a Sync.
func (w *Writer) batch(ctx context.Context, first item, linger bool) {
	entries := w.entries[:0]
	seqs := w.seqs[:0]
	var syncs []chan struct{}
	take := func(it item) {
		if it.sync != nil {
			syncs = append(syncs, it.sync)
			return
		}
		entries = append(entries, it.entry)
		seqs = append(seqs, it.seq)
	}
	take(first)
	if linger && w.opt.Linger > 0 && len(syncs) == 0 && len(entries) < w.opt.Batch && len(w.queue) < w.full {
		t := time.NewTimer(w.opt.Linger)
		select {
		case <-t.C:
		case <-w.wake:
		case <-ctx.Done():
		}
		t.Stop()
	}
more:
	for len(entries) < w.opt.Batch && len(syncs) == 0 {
		select {
		case it := <-w.queue:
			take(it)
		default:
			break more
		}
	}
	w.write(ctx, entries, seqs)
	clear(entries) // keep no entry's strings alive until the next batch
	w.entries = entries[:0]
	w.seqs = seqs[:0]
	for _, s := range syncs {
		close(s)
	}
}

// write stores entries in one transaction, counting them written or
// lost. seqs are their numbers in the journal, one an entry (0 for one
// not journaled; nil when none is): when any is journaled, the batch is
// begun and done in the journal, and written under its key. When the
// journal cannot name the batch, the journaled entries are left to it
// (Hold: it hands them on once it can), and the others written now.
func (w *Writer) write(ctx context.Context, entries []store.AuditEntry, seqs []uint64) {
	if len(entries) == 0 {
		return
	}
	var key string
	if w.opt.Journal != nil && slices.ContainsFunc(seqs, func(n uint64) bool { return n != 0 }) {
		key = NewKey()
		if err := w.opt.Journal.BeginPart(key, PartAudit, seqs); err != nil {
			// Written now, with no begun line, they would be written
			// again by a recovery.
			held := Batch{Key: key}
			var rest []store.AuditEntry
			for i, e := range entries {
				if seqs[i] != 0 {
					held.Audit = append(held.Audit, e)
				} else {
					rest = append(rest, e)
				}
			}
			w.opt.Journal.Hold(held)
			w.log.Warn("audit: batch not journaled; the journal hands it on once it can write", "entries", len(held.Audit), "err", err)
			w.write(ctx, rest, nil)
			return
		}
		// Done once the store or the spool took the batch; kept as
		// begun otherwise, for the journal to hand on again (Retry) or
		// recover.
		defer func() {
			if !w.lost.Load() {
				w.opt.Journal.Done(key)
			} else {
				w.opt.Journal.Failed(key)
			}
		}()
	}
	var err error
	if key != "" {
		_, err = w.st.ApplySpooled(within(ctx, w.opt.Bound), key, nil, entries)
	} else {
		err = w.st.AddAudit(within(ctx, w.opt.Bound), entries)
	}
	if err != nil && w.opt.Spool != nil {
		if key == "" {
			key = NewKey()
		}
		var kept bool
		if kept, err = w.opt.Spool.keep(within(ctx, w.opt.Bound), w.st, Batch{Key: key, Audit: entries}, err); kept {
			w.lost.Store(false)
			if err != nil {
				w.log.Warn("audit: entries spooled; the store did not take them", "entries", len(entries), "err", err)
			}
			return
		}
	}
	if err != nil {
		w.lost.Store(true)
		w.opt.Metrics.AuditFailed(len(entries))
		w.log.Warn("audit: entries not written", "entries", len(entries), "err", err)
		return
	}
	w.lost.Store(false)
	w.opt.Metrics.AuditWritten(len(entries))
}

// ErrCannotRecord is what Recording returns while the audit log cannot be
// written.
var ErrCannotRecord = errors.New("audit: the last batch could be written neither to the store nor to the spool")

// Recording returns ErrCannotRecord while the last batch written was
// taken neither by the store nor by the spool, and nil otherwise.
func (w *Writer) Recording() error {
	if w.lost.Load() {
		return ErrCannotRecord
	}
	return nil
}

// prune forgets entries older than Retention.
func (w *Writer) prune(ctx context.Context) {
	before := w.opt.Now().Add(-w.opt.Retention)
	n, err := w.st.PruneAudit(within(ctx, w.opt.Bound), before)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("audit: prune", "err", err)
		}
		return
	}
	if n > 0 {
		w.log.Info("audit: pruned", "entries", n, "before", before.UTC().Format(time.RFC3339))
	}
}

// Prune forgets entries older than Retention now, and says how many.
func (w *Writer) Prune(ctx context.Context) (int64, error) {
	return w.st.PruneAudit(within(ctx, w.opt.Bound), w.opt.Now().Add(-w.opt.Retention))
}

// Scrub replaces, in e, every token, or what is left of one, in the
// fields that can hold what a box sent (its method, route, box,
// capability, words, reason, message and the pool entry that paid), as
// proxy.ScrubKept does: the broker scrubs its records before they are
// journaled, and the Writer scrubs every entry again as it is queued, so
// that no entry made elsewhere (a mint's) keeps a token either.
//
// Each of those strings is also made one every store takes (store.Text,
// uncut): invalid UTF-8 and NUL bytes (which PostgreSQL refuses in text,
// for good: a batch set aside) become U+FFFD.
func Scrub(e *store.AuditEntry) {
	for _, f := range [...]*string{&e.Method, &e.Route, &e.Box, &e.Capability, &e.Reason, &e.Message, &e.PaidBy} {
		*f = store.Text(proxy.ScrubKept(*f), 0)
	}
	e.Words = proxy.ScrubKeptAll(e.Words)
	cloned := false // the caller's words are never changed
	for i, w := range e.Words {
		if s := store.Text(w, 0); s != w {
			if !cloned {
				e.Words, cloned = slices.Clone(e.Words), true
			}
			e.Words[i] = s
		}
	}
}
