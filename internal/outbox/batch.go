package outbox

import (
	"encoding/json"
	"errors"
)

// A batch's life in the journal: begun before it goes to the store,
// done once the store (or the spool, or the dead letters) took it, or
// failed, held or kept for Retry to hand on.

// Begin notes that the records of (their numbers; 0s are skipped) are
// going to the store as the batch key, every part of each. When the line
// cannot be written it returns the error, and the batch must not go to
// the store: a recovery, reading no begun line, would hand its records
// on again under keys of its own. The journal keeps the batch instead:
// its caller gives it the batch as made (Hold), and Retry writes its
// line and hands it on, once.
func (j *Journal) Begin(key string, of []uint64) error { return j.BeginPart(key, partsAll, of) }

// BeginPart is Begin for part of each record (PartAudit or PartSettle):
// the batch takes that part, and the record is kept until its other part
// is done too.
func (j *Journal) BeginPart(key string, part Part, of []uint64) error {
	if j == nil {
		return nil
	}
	part &= partsAll // a Part of no record's parts names none
	kept := make([]uint64, 0, len(of))
	for _, n := range of {
		if n != 0 {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	b, err := begunLines(key, kept, part)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.writeLocked(b); err != nil {
		// Kept, not sent: once its caller holds it here (Hold), Retry
		// writes the line and hands it on.
		j.batches[key] = openBatch{of: kept, part: part, unwritten: true}
		return err
	}
	j.batches[key] = openBatch{of: kept, part: part}
	return nil
}

// Hold keeps b, a batch whose BeginPart (under b.Key) failed, or one
// Keep could not journal whole, for Retry to hand on as it is, under its
// key, in place of the records the journal holds for it. What b holds
// beyond those records is kept in memory only: a kill loses it.
func (j *Journal) Hold(b Batch) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	ob := j.batches[b.Key]
	ob.held = &b
	j.batches[b.Key] = ob
	j.failed[b.Key] = true
}

// holdOnly is Hold for b, of which only records are not in the
// journal, unless they would take the records held in memory only past
// their bound: then it holds nothing and returns false.
func (j *Journal) holdOnly(b Batch, only int) bool {
	j.mu.Lock()
	if only > 0 && j.only+only > j.maxHeld {
		j.mu.Unlock()
		return false
	}
	j.only += only
	ob := j.batches[b.Key]
	ob.only += only
	j.batches[b.Key] = ob
	j.mu.Unlock()
	j.Hold(b)
	return true
}

// Keep journals b, a batch of records the journal does not hold (a
// budgeted call's settlement) that neither the store nor the spool took:
// each of its settlements and entries as a record, and the batch begun
// under b.Key and Failed, so that Retry hands it on (or a restart's
// recovery, if one comes first), under its key, once. What the journal
// cannot write is held in memory all the same (Hold), for Retry: only a
// kill while the disk refuses writes loses it. It returns the journal's
// write error, nil when b is journaled whole. The records held in memory
// only are bounded (DefaultMaxHeld): past the bound b is not held, but
// for the records the journal wrote, and the error wraps ErrHeldFull.
func (j *Journal) Keep(b Batch) error {
	if j == nil {
		return nil
	}
	seqs := make([]uint64, 0, len(b.Settle)+len(b.Audit))
	var err error
	add := func(n uint64, werr error) {
		if n != 0 {
			seqs = append(seqs, n)
		}
		err = errors.Join(err, werr)
	}
	for i := range b.Settle {
		add(j.Call(nil, &b.Settle[i]))
	}
	for i := range b.Audit {
		add(j.Call(&b.Audit[i], nil))
	}
	// The records written are named even when others were not, so that
	// they are done once b is handed on.
	err = errors.Join(err, j.BeginPart(b.Key, partsAll, seqs))
	if err != nil {
		if !j.holdOnly(b, len(b.Settle)+len(b.Audit)-len(seqs)) {
			// The records written are handed on as the journal holds
			// them (Retry); the rest are not kept.
			j.Failed(b.Key)
			return errors.Join(err, ErrHeldFull)
		}
		return err
	}
	j.Failed(b.Key)
	return nil
}

// Done notes that the batch key, begun with Begin, was taken by the
// store or the spool: its records are no longer the journal's to keep.
func (j *Journal) Done(key string) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	ob, ok := j.batches[key]
	if !ok {
		return
	}
	if len(ob.of) == 0 {
		j.only -= ob.only
		delete(j.batches, key) // held in memory only: no line names it
		return
	}
	// The line names the batch's records too: a begun line damaged on
	// the disk then leaves them done all the same.
	b, _ := markerLine(journalLine{D: key, Of: ob.of, P: partNames[ob.part]})
	if _, err := j.writeLocked(b); err != nil {
		// Kept as begun: recovery applies the batch again under its
		// key, which applies it once.
		return
	}
	j.only -= ob.only
	delete(j.batches, key)
	for _, n := range ob.of {
		j.doneLocked(n, ob.part)
	}
	if j.size > max(j.max, 2*j.compacted) {
		if err := j.rewrite(); err != nil {
			j.log.Warn("journal: could not be rewritten; it goes on growing", "bytes", j.size, "err", err)
			j.compacted = j.size
		}
	}
}

// Failed notes that the batch key, begun with BeginPart, was taken by
// neither the store nor the spool: its records stay in the journal, and
// Retry hands them on again (a restart's recovery would otherwise be
// the first to).
func (j *Journal) Failed(key string) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.batches[key]; ok {
		j.failed[key] = true
	}
}

// Failing is how many batches Failed noted that Retry has not handed on.
func (j *Journal) Failing() int {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.failed)
}

// Retry hands each batch Failed noted to put, under its own key (so that
// it applies once, however often it is handed on), with the part of each
// of its records it takes, and notes it done once put took it. It stops
// at the first batch put refuses, keeping it and those not yet handed
// on, and returns how many it handed on.
func (j *Journal) Retry(put func(Batch) error) (int, error) {
	if j == nil {
		return 0, nil
	}
	j.mu.Lock()
	var out []Batch
	for key := range j.failed {
		ob, ok := j.batches[key]
		if !ok {
			delete(j.failed, key)
			continue
		}
		if ob.held != nil {
			b := *ob.held
			if b.Store == "" {
				b.Store = j.store
			}
			out = append(out, b)
			continue
		}
		b := Batch{Key: key, Store: j.store}
		for _, n := range ob.of {
			r, ok := j.open[n]
			var l journalLine
			if !ok || json.Unmarshal(r.line, &l) != nil {
				continue
			}
			if take := ob.part & r.left; take&PartAudit != 0 && l.A != nil {
				b.Audit = append(b.Audit, *l.A)
			}
			if take := ob.part & r.left; take&PartSettle != 0 && l.T != nil {
				b.Settle = append(b.Settle, *l.T)
			}
		}
		out = append(out, b)
	}
	j.mu.Unlock()
	handed := 0
	for _, b := range out {
		if err := j.writeBegun(b.Key); err != nil {
			return handed, err
		}
		if len(b.Audit)+len(b.Settle) > 0 {
			if err := put(b); err != nil {
				return handed, err
			}
			handed++
		}
		j.mu.Lock()
		delete(j.failed, b.Key)
		j.mu.Unlock()
		j.Done(b.Key)
	}
	return handed, nil
}

// writeBegun writes the begun line of the batch key when its first
// write failed (BeginPart): a batch goes to the store only once the
// journal names it.
func (j *Journal) writeBegun(key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	ob, ok := j.batches[key]
	if !ok || !ob.unwritten || len(ob.of) == 0 {
		return nil
	}
	b, err := begunLines(key, ob.of, ob.part)
	if err == nil {
		_, err = j.writeLocked(b)
	}
	if err != nil {
		return err
	}
	ob.unwritten = false
	j.batches[key] = ob
	return nil
}
