package spend

import (
	"context"
	"errors"
	"time"

	"github.com/intentius/boxbroker/internal/spool"
	"github.com/intentius/boxbroker/internal/store"
)

// queue adds a call that reserved nothing to the next batch, merging its
// charge and usage with those of the same box, principal and month. It
// returns false, queueing nothing, when RunBatches is not running.
func (m *Meter) queue(s settlement, charge int64, rows []store.Usage) bool {
	if !m.batching.Load() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.batching.Load() { // RunBatches stopped meanwhile
		return false
	}
	var seq uint64
	if m.cfg.Journal != nil {
		// Journaled before it is queued, so that a batch names only
		// records the journal holds. A journal that cannot write says
		// so in its Err (the broker then cannot record).
		var err error
		seq, err = m.cfg.Journal.Settle(store.Settlement{Box: s.box, Principal: s.principal, Month: s.month, Charge: charge, Usage: rows})
		if err != nil {
			m.log.Error("spend: settlement not journaled", "box", s.box, "err", err)
		}
	}
	k := batchKey{s.box, s.principal, s.month}
	if seq != 0 {
		m.seqs[k] = append(m.seqs[k], seq)
	}
	p := m.pending[k]
	if p == nil {
		p = &store.Settlement{Box: s.box, Principal: s.principal, Month: s.month}
		m.pending[k] = p
	}
	p.Charge += charge
	for _, u := range rows {
		i := 0
		for i < len(p.Usage) && (p.Usage[i].PayerKind != u.PayerKind || p.Usage[i].Model != u.Model) {
			i++
		}
		if i == len(p.Usage) {
			p.Usage = append(p.Usage, u)
			continue
		}
		q := &p.Usage[i]
		q.Calls += u.Calls
		q.Unpriced += u.Unpriced
		q.Unmeasured += u.Unmeasured
		q.InputTokens += u.InputTokens
		q.OutputTokens += u.OutputTokens
		q.CacheWriteTokens += u.CacheWriteTokens
		q.CacheReadTokens += u.CacheReadTokens
		q.Cost += u.Cost
	}
	return true
}

// RunBatches settles the queued calls every Config.BatchEvery until ctx
// ends, then settles what is left and returns; calls that end after that
// settle one by one. With BatchEvery zero it returns at once.
func (m *Meter) RunBatches(ctx context.Context) {
	if m.cfg.BatchEvery <= 0 {
		return
	}
	m.mu.Lock()
	m.batching.Store(true)
	m.mu.Unlock()
	t := time.NewTicker(m.cfg.BatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.batching.Store(false)
			m.mu.Unlock()
			m.Flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			m.Flush(ctx)
		}
	}
}

// Flush settles every queued call now: one store transaction per box,
// principal and month. A settlement the store refuses is logged, as one
// call's is.
func (m *Meter) Flush(ctx context.Context) {
	m.mu.Lock()
	var batch map[batchKey]*store.Settlement
	var seqs map[batchKey][]uint64
	if len(m.pending) > 0 {
		// Taken whole: an empty map stays queue's, and is not read here
		// while queue writes it.
		batch, m.pending = m.pending, map[batchKey]*store.Settlement{}
		seqs, m.seqs = m.seqs, map[batchKey][]uint64{}
	}
	m.mu.Unlock()
	for k, st := range batch {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := m.record(sctx, *st, seqs[k])
		cancel()
		if err != nil {
			m.log.Error("spend: settlement not recorded", "box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", err)
		}
	}
}

// record writes st: under a key of its own when the store takes keyed
// batches, and to the spool under that key when the store does not take
// it (nor refuses it for a box removed meanwhile). When seqs (the
// journal's numbers of the calls st settles) are given, the batch is
// begun in the journal first, and done once the store or the spool took
// it.
func (m *Meter) record(ctx context.Context, st store.Settlement, seqs []uint64) error {
	keyed, ok := m.cfg.Settle.(store.Spooled)
	if !ok {
		return m.cfg.Settle.Settle(ctx, st)
	}
	key := spool.NewKey()
	if len(seqs) > 0 && m.cfg.Journal != nil {
		if err := m.cfg.Journal.Begin(key, seqs); err != nil {
			m.log.Error("spend: batch not journaled", "box", st.Box, "err", err)
		}
	}
	err := m.applyKeyed(ctx, keyed, key, st)
	if err == nil && len(seqs) > 0 && m.cfg.Journal != nil {
		m.cfg.Journal.Done(key)
	}
	return err
}

// applyKeyed writes st under key, or spools it under key when the store
// does not take it.
func (m *Meter) applyKeyed(ctx context.Context, keyed store.Spooled, key string, st store.Settlement) error {
	_, err := keyed.ApplySpooled(ctx, key, []store.Settlement{st}, nil)
	if err == nil || m.cfg.Spill == nil || errors.Is(err, store.ErrNotFound) {
		return err
	}
	if serr := m.cfg.Spill(key, st); serr != nil {
		return errors.Join(err, serr)
	}
	m.log.Warn("spend: settlement spooled; the store did not take it", "box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", err)
	return nil
}
