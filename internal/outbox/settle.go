package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// batchKey is what one batched settlement charges — the box as its
// calls named it (their store.Settlement's BoxCreated, in UTC with no
// monotonic reading, so that equal times are equal keys: a box removed
// and one added under its name are two), its principal and month — and
// whether its calls' records are in the journal (bare: not), so that a
// batch the journal names holds only records it holds.
type batchKey struct {
	box, principal, month string
	created               time.Time
	bare                  bool
}

// QueueCall adds st, the settlement of a call that reserved nothing, to
// the next batch, journaled first, merging its charge and usage with
// those of the same box, principal and month (its prompt-cache use with
// that of the same payer kind, entry and hour). It returns false,
// queueing nothing, when RunBatches is not running: st is then the
// caller's to Settle. (One that stops meanwhile has st, journaled,
// settled at once, alone.) When ctx, the call's context, carries the
// call's Call (see CallContext), st is held there, to be journaled with
// the call's audit entry in one record as the call concludes
// (Outbox.RecordCall, Call.Close), and queued then.
func (o *Outbox) QueueCall(ctx context.Context, st store.Settlement) bool {
	if !o.batching.Load() {
		return false
	}
	if c := CallFrom(ctx); c != nil && c.hold(o, st) {
		return true
	}
	o.queueAlone(st)
	return true
}

// queueAlone is queue for st with no audit entry: st is copied to the
// heap here, not in QueueCall, whose st a Call holds.
func (o *Outbox) queueAlone(st store.Settlement) {
	st.Reservation = 0 // a call queued reserved nothing
	o.queue(nil, &st)
}

// queue journals st (which reserved nothing) — with e, the audit entry of its call, in one record
// when e is not nil — and adds st to the next batch, or, when RunBatches
// has stopped meanwhile, settles it now. It returns the record's number
// (0 when the journal could not take it).
//
// The journal's append is made outside o.mu, so that concurrent calls'
// records share a write (group commit); a batch still names only
// records the journal holds, as st is added to it only once journaled.
func (o *Outbox) queue(e *store.AuditEntry, st *store.Settlement) uint64 {
	// A journal that cannot write says so in its Err (the broker then
	// cannot record).
	n, err := o.Journal.Call(e, st)
	if err != nil {
		o.log.Error("spend: settlement not journaled", "box", st.Box, "err", err)
	}
	o.mu.Lock()
	if o.batching.Load() {
		o.add(*st, n)
		o.mu.Unlock()
		return n
	}
	o.mu.Unlock()
	// RunBatches stopped (its last Flush is done or under way): settled
	// now, alone, as a call that ends after it is.
	var seqs []uint64
	if n != 0 {
		seqs = []uint64{n}
	}
	o.settleNow(context.Background(), *st, seqs)
	return n
}

// add adds st, journaled as record seq (0: not journaled), to the next
// batch; o.mu is held.
func (o *Outbox) add(st store.Settlement, seq uint64) {
	k := batchKey{st.Box, st.Principal, st.Month, st.BoxCreated.UTC().Round(0), seq == 0}
	if seq != 0 {
		o.seqs[k] = append(o.seqs[k], seq)
	}
	p := o.pending[k]
	if p == nil {
		p = &store.Settlement{Box: st.Box, BoxCreated: k.created, Principal: st.Principal, Month: st.Month}
		o.pending[k] = p
	}
	p.Charge = store.AddCapped(p.Charge, st.Charge)
	for _, u := range st.Usage {
		p.Usage = store.Merge(p.Usage, u, func(r *store.Usage) bool { return r.PayerKind == u.PayerKind && r.Model == u.Model })
	}
	for _, c := range st.Cache {
		p.Cache = store.Merge(p.Cache, c, func(r *store.CacheUsage) bool {
			return r.PayerKind == c.PayerKind && r.Entry == c.Entry && r.Hour.Equal(c.Hour)
		})
	}
}

// RunBatches settles the queued calls every Config.BatchEvery until ctx
// ends, then settles what is left and returns; calls that end after that
// settle one by one. With BatchEvery zero it returns at once.
func (o *Outbox) RunBatches(ctx context.Context) {
	if o.cfg.BatchEvery <= 0 {
		return
	}
	o.mu.Lock()
	o.batching.Store(true)
	o.mu.Unlock()
	t := time.NewTicker(o.cfg.BatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			o.mu.Lock()
			o.batching.Store(false)
			o.mu.Unlock()
			o.Flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			o.Flush(ctx)
		}
	}
}

// Flush settles every queued call now: one store transaction per box,
// principal and month. A settlement the store refuses is logged, as one
// call's is. It returns once every call queued before it is settled,
// those a concurrent Flush (RunBatches') took as well.
func (o *Outbox) Flush(ctx context.Context) {
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	var batch map[batchKey]*store.Settlement
	var seqs map[batchKey][]uint64
	if len(o.pending) > 0 {
		// Taken whole: an empty map stays Queue's, and is not read here
		// while Queue writes it.
		batch, o.pending = o.pending, map[batchKey]*store.Settlement{}
		seqs, o.seqs = o.seqs, map[batchKey][]uint64{}
	}
	o.mu.Unlock()
	for k, st := range batch {
		o.settleNow(ctx, *st, seqs[k])
	}
}

// settleNow is record, bounded to 30 s, for a settlement whose call has
// no one to tell: one neither the store nor the spool took is logged.
func (o *Outbox) settleNow(ctx context.Context, st store.Settlement, seqs []uint64) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := o.record(ctx, st, seqs); err != nil {
		o.log.Error("spend: settlement not recorded", "box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", err)
	}
}

// Settle writes st now, under a key of its own, and to the spool under
// that key when the store does not take it; when neither takes it, the
// journal keeps it (Journal.Keep), and Replay hands it on under that
// key, once. It returns store.ErrNotFound for a box removed meanwhile
// (not kept).
func (o *Outbox) Settle(ctx context.Context, st store.Settlement) error {
	return o.record(ctx, st, nil)
}

// record writes st under a key of its own; when the store does not take
// it (but for ErrNotFound: a box removed meanwhile), the dead letters or
// the spool keep it under that key (Spool.keep), or else, when no seqs
// are given, the journal (Journal.Keep). When seqs (the
// journal's numbers of the calls st settles) are given, the batch is
// begun in the journal first, and done once the store, the spool or the
// dead letters took it (or, when none did, once Replay hands it on).
func (o *Outbox) record(ctx context.Context, st store.Settlement, seqs []uint64) (err error) {
	key := NewKey()
	b := Batch{Key: key, Settle: []store.Settlement{st}}
	if len(seqs) > 0 {
		if err := o.Journal.BeginPart(key, PartSettle, seqs); err != nil {
			// Applied now, with no begun line, its calls would be
			// charged again by a recovery: the journal hands it on once
			// it can write.
			o.Journal.Hold(b)
			o.log.Warn("spend: batch not journaled; the journal hands it on once it can write", "box", st.Box, "err", err)
			return nil
		}
		defer func() {
			if err == nil {
				o.Journal.Done(key)
			} else {
				o.Journal.Failed(key) // handed on again by Replay
			}
		}()
	}
	_, err = o.cfg.Store.ApplySpooled(within(ctx, o.cfg.Bound), key, b.Settle, nil)
	if err == nil || o.Spool == nil || errors.Is(err, store.ErrNotFound) {
		return err
	}
	kept, err := o.Spool.keep(within(ctx, o.cfg.Bound), o.cfg.Store, b, err)
	if !kept && len(seqs) == 0 && o.Journal != nil {
		// A budgeted call's settlement, which no journal held: kept
		// there now, for Replay to hand on, once, under its key.
		if jerr := o.Journal.Keep(b); errors.Is(jerr, ErrHeldFull) {
			o.log.Error("spend: settlement lost: taken by neither the store, the spool nor the journal, and the settlements held in memory are at their bound; calls are refused until the store or the spool takes what is held",
				"box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", errors.Join(err, jerr))
		} else if jerr != nil {
			o.log.Error("spend: settlement taken by neither the store, the spool nor the journal; it is held in memory until the store takes it",
				"box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", errors.Join(err, jerr))
		} else {
			o.log.Warn("spend: settlement journaled; neither the store nor the spool took it", "box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", err)
		}
		return nil
	}
	if !kept {
		return err
	}
	if err != nil {
		o.log.Warn("spend: settlement spooled; the store did not take it", "box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", err)
	}
	return nil
}
