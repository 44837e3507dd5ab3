// A Journal keeps, in the data directory, the records of the calls
// a replica has answered until the store (or the spool) has taken them,
// so that a replica killed with -9 loses none of them.
//
// A call's records — its settlement, when it waits for a batch, and its
// audit entry — are appended as the call completes, before the box has
// the end of its answer, as one record (one line, one append) under a
// sequence number. Each part goes to the store in batches of its own
// kind (BeginPart), and the record is done once both parts are; a
// journal written when each part was a record of its own still replays.
// The append is a
// plain write(2): the page cache outlives the process, so a kill loses
// nothing the journal took (a power cut can still lose its last lines).
// Before a batch of records goes to the store, a line names the batch's
// key and the records it holds (Begin); the batch is applied under that
// key (store.Spooled), so it applies once; after the store or the spool
// has taken it, a line says it is done (Done).
//
// Each replica writes a journal of its own, journal-<generation>.jsonl,
// and holds a lock on it (flock) for its life. OpenJournal recovers every
// journal in the directory whose lock it can take — its replica is gone
// — and removes it: a batch begun and not done is handed on under its
// own key (applied already or not, it applies once), and the records in
// no batch under keys made from the journal's generation and their
// sequence numbers, so that a recovery cut short and run again hands
// them on under the same keys. A journal past its bound is rewritten
// with only the records not yet done. A journal's first line names its
// generation and the store its records belong to, and the batches it
// hands on name that store too.

package outbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/store"
)

// JournalPattern matches the names of journals in the data directory: one a
// replica, journal-<generation>.jsonl, locked (flock) for as long as its
// replica runs, so that replicas sharing a data directory each keep
// their own, and each recovers only those whose replica is gone.
const JournalPattern = "journal-*.jsonl"

// journalName is the journal of generation gen, and journalCompactName its rewrite's.
func journalName(gen string) string        { return "journal-" + gen + ".jsonl" }
func journalCompactName(gen string) string { return "journal-" + gen + ".compact" }

// DefaultJournalMax is the size, in bytes, past which the journal is rewritten
// with only the records not yet done.
const DefaultJournalMax = 16 << 20

// recoverBatch bounds the records handed on in one batch at recovery.
const recoverBatch = 256

// journalLine is one line of the journal: a header (Gen, and Store, the
// identity of the store its records belong to), a record (N with A, T or
// both: a call's audit entry and settlement share one record), a batch
// begun (B with Of, and P, the part of its records it takes: "a" their
// audit entries, "t" their settlements, "" all of each) or a batch done
// (D). A journal written before records held both parts names no P, and
// each of its records holds one part: its batches take all of each.
type journalLine struct {
	Gen   string            `json:"gen,omitempty"`
	Store string            `json:"store,omitempty"`
	N     uint64            `json:"n,omitempty"`
	A     *store.AuditEntry `json:"a,omitempty"`
	T     *store.Settlement `json:"t,omitempty"`
	B     string            `json:"b,omitempty"`
	Of    []uint64          `json:"of,omitempty"`
	P     string            `json:"p,omitempty"`
	D     string            `json:"d,omitempty"`
}

// Part is a part of a record a batch takes: its audit entry or its
// settlement, or both.
type Part uint8

const (
	PartAudit  Part = 1 << iota // the audit entry
	PartSettle                  // the settlement
	partsAll   = PartAudit | PartSettle
)

// partName is part's name in a batch's line ("" for both), and partOf the
// part a line's name says.
func partName(p Part) string {
	switch p {
	case PartAudit:
		return "a"
	case PartSettle:
		return "t"
	}
	return ""
}

func partOf(name string) Part {
	switch name {
	case "a":
		return PartAudit
	case "t":
		return PartSettle
	}
	return partsAll
}

// parts is what parts l, a record's line, holds.
func (l *journalLine) parts() Part {
	var p Part
	if l.A != nil {
		p |= PartAudit
	}
	if l.T != nil {
		p |= PartSettle
	}
	return p
}

// openRec is a record not yet done: its line, the parts the line holds,
// and those of them not yet done.
type openRec struct {
	line      []byte
	has, left Part
}

// openBatch is a batch begun and not done: its records, and the part of
// each it takes.
type openBatch struct {
	of   []uint64
	part Part
}

// Journal is one replica's journal. Its methods are safe for concurrent
// use; a nil *Journal keeps nothing (each method does nothing).
type Journal struct {
	dir string
	max int64
	log *slog.Logger

	// gmu guards forming, the group of records the next write takes
	// (nil when none is forming). It is taken alone, or inside mu.
	gmu     sync.Mutex
	forming *group
	// written is signalled, on gmu, when a group of more than one
	// record is written; its followers wait on it.
	written *sync.Cond

	mu sync.Mutex // guards everything below
	f  *os.File
	// gen names this journal's life, for the keys recovery makes, and
	// store the store its records belong to.
	gen, store string
	size       int64
	// compacted is the size of the last rewrite: the next is due at
	// twice it, or at max, whichever is larger.
	compacted int64
	seq       uint64
	// open holds each record not yet done, by its number, and batches
	// each batch begun and not done.
	open    map[uint64]openRec
	batches map[string]openBatch
	// broken is set when a write failed, so that the next line begins a
	// line of its own; err is the last write's failure, nil once one
	// succeeds.
	broken bool
	err    error
}

// OpenJournal opens the journal in dir, bounded to max bytes
// (DefaultJournalMax when zero or less), for the records of the store
// whose identity is id ("": unnamed). What a process before left in it is
// first handed to put, batch by batch (to be spooled and applied once),
// each batch naming the store its journal named; OpenJournal returns an
// error, keeping the journal, when put refuses one.
func OpenJournal(dir string, max int64, id string, log *slog.Logger, put func(Batch) error) (*Journal, int, error) {
	if max <= 0 {
		max = DefaultJournalMax
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("journal: %w", err)
	}
	n, err := recoverDir(dir, put, log)
	if err != nil {
		return nil, 0, err
	}
	j := &Journal{dir: dir, max: max, log: log, gen: NewKey(), store: id, open: map[uint64]openRec{}, batches: map[string]openBatch{}}
	j.written = sync.NewCond(&j.gmu)
	if err := j.start(); err != nil {
		return nil, 0, err
	}
	return j, n, nil
}

// recoverDir recovers every journal in dir whose replica is gone (whose
// lock can be taken), removing each once recovered, and says how many
// records it handed on.
func recoverDir(dir string, put func(Batch) error, log *slog.Logger) (int, error) {
	// A rewrite cut off by a crash: the journal it was made from holds
	// everything.
	if names, _ := filepath.Glob(filepath.Join(dir, "journal-*.compact")); len(names) > 0 {
		for _, p := range names {
			if f, err := os.Open(p); err == nil {
				if ok, _ := filelock.TryLock(f); ok {
					os.Remove(p)
				}
				f.Close()
			}
		}
	}
	names, err := filepath.Glob(filepath.Join(dir, JournalPattern))
	if err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	total := 0
	for _, p := range names {
		f, err := os.Open(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // recovered by another replica meanwhile
			}
			return 0, fmt.Errorf("journal: %w", err)
		}
		ok, err := filelock.TryLock(f)
		if err != nil || !ok {
			f.Close()
			continue // its replica runs
		}
		n, err := recoverFile(p, put, log)
		if err == nil {
			err = os.Remove(p)
		}
		f.Close()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// start begins this replica's journal, locked, with its header.
func (j *Journal) start() error {
	tmp := filepath.Join(j.dir, journalCompactName(j.gen))
	f, size, err := j.writeFresh(tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(j.dir, journalName(j.gen))); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	j.f, j.size, j.compacted = f, size, size
	return nil
}

// writeFresh writes, to a new file at p, locked, the header and the
// lines of the records and batches not yet done, synced; j.mu is held
// (or j is not yet shared).
func (j *Journal) writeFresh(p string) (*os.File, int64, error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("journal: %w", err)
	}
	if ok, err := filelock.TryLock(f); !ok {
		f.Close()
		return nil, 0, fmt.Errorf("journal: %s is locked by another process: %v", p, err)
	}
	w := bufio.NewWriter(f)
	hdr, _ := json.Marshal(journalLine{Gen: j.gen, Store: j.store})
	w.Write(append(hdr, '\n'))
	for _, r := range j.open {
		w.Write(r.lineLeft())
	}
	for key, b := range j.batches {
		l, _ := json.Marshal(journalLine{B: key, Of: b.of, P: partName(b.part)})
		w.Write(append(l, '\n'))
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		os.Remove(p)
		return nil, 0, fmt.Errorf("journal: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("journal: %w", err)
	}
	return f, fi.Size(), nil
}

// lineLeft is r's line, holding only the parts of it not yet done: a
// rewrite keeps no part a batch took.
func (r openRec) lineLeft() []byte {
	if r.left == r.has {
		return r.line
	}
	var l journalLine
	if json.Unmarshal(r.line, &l) != nil {
		return r.line
	}
	if r.left&PartAudit == 0 {
		l.A = nil
	}
	if r.left&PartSettle == 0 {
		l.T = nil
	}
	b, err := json.Marshal(&l)
	if err != nil {
		return r.line
	}
	return append(b, '\n')
}

// Audit appends e as a record and returns its number, or 0 and the
// write's error when the journal cannot take it.
func (j *Journal) Audit(e store.AuditEntry) (uint64, error) { return j.Call(&e, nil) }

// Settle appends st as a record and returns its number, or 0 and the
// write's error when the journal cannot take it.
func (j *Journal) Settle(st store.Settlement) (uint64, error) { return j.Call(nil, &st) }

// Call appends one record holding a call's audit entry e and its
// settlement st (either may be nil), and returns its number, or 0 and
// the write's error when the journal cannot take it. A record's parts
// are batched apart (BeginPart), and it is done once both are.
func (j *Journal) Call(e *store.AuditEntry, st *store.Settlement) (uint64, error) {
	if j == nil || (e == nil && st == nil) {
		return 0, nil
	}
	b := bodies.Get().(*body)
	defer b.put()
	var parts Part
	if e != nil {
		if err := b.field(`,"a":`, e); err != nil {
			return 0, err
		}
		parts |= PartAudit
	}
	if st != nil {
		if err := b.field(`,"t":`, st); err != nil {
			return 0, err
		}
		parts |= PartSettle
	}
	// record copies the body into its group's write before it returns.
	return j.record(b.buf.Bytes(), parts)
}

// body is a record's fields being encoded, with encoding/json's Encoder
// over it: kept in bodies for reuse, as encoding a record then
// allocates no buffer of its own.
type body struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var bodies = sync.Pool{New: func() any {
	b := &body{}
	b.enc = json.NewEncoder(&b.buf)
	return b
}}

// maxPooledBody bounds the buffer a body keeps when it goes back to the
// pool: an unusually large record's is let go.
const maxPooledBody = 64 << 10

// field appends name and v's JSON encoding (as json.Marshal's) to b.
func (b *body) field(name string, v any) error {
	b.buf.WriteString(name)
	if err := b.enc.Encode(v); err != nil {
		return fmt.Errorf("journal: encode: %w", err)
	}
	b.buf.Truncate(b.buf.Len() - 1) // Encode's newline
	return nil
}

// put empties b and returns it to the pool.
func (b *body) put() {
	if b.buf.Cap() > maxPooledBody {
		return
	}
	b.buf.Reset()
	bodies.Put(b)
}

// record appends {"n":seq<body>} under the next number, body being its
// parts' fields.
//
// Concurrent appends share one write(2) (group commit): the first to
// arrive while no group is forming leads a group, waits for the file
// (the write before it), closes the group and writes every line that
// joined it at once; the others wait for that write. No timer is
// involved, so a lone append is written at once, as before; each
// returns only once its own line is in the file.
func (j *Journal) record(body []byte, parts Part) (uint64, error) {
	j.gmu.Lock()
	g := j.forming
	leader := g == nil
	if leader {
		g = &group{}
		g.recs = g.first[:0]
		j.forming = g
	}
	i := len(g.recs)
	g.recs = append(g.recs, groupRec{body: body, parts: parts})
	if !leader {
		for !g.done {
			j.written.Wait()
		}
		j.gmu.Unlock()
		return g.recs[i].seq, g.recs[i].err
	}
	j.gmu.Unlock()
	j.mu.Lock()
	j.gmu.Lock()
	j.forming = nil // later arrivals form the next group
	j.gmu.Unlock()
	j.writeGroupLocked(g)
	j.mu.Unlock()
	j.gmu.Lock()
	g.done = true
	if len(g.recs) > 1 {
		j.written.Broadcast()
	}
	j.gmu.Unlock()
	return g.recs[0].seq, g.recs[0].err
}

// group is the records that share one write; done is set (under gmu,
// with written broadcast) once it is written or failed, with each
// record's number or error set.
type group struct {
	recs  []groupRec
	first [2]groupRec // recs' first backing: most groups are small
	done  bool
}

// groupRec is one record of a group: what record was given, and what
// it returns.
type groupRec struct {
	body  []byte
	parts Part
	end   int // where its line ends in the group's write
	seq   uint64
	err   error
}

// writeGroupLocked numbers g's records, writes their lines in one
// write, and keeps each whose line is whole in the file; j.mu is held.
// A write cut short keeps the records whose lines it wrote in full
// (recovery reads them) and fails the rest (their lines are cut off,
// and recovery skips them).
func (j *Journal) writeGroupLocked(g *group) {
	size := 0
	for _, r := range g.recs {
		size += len(r.body) + 32
	}
	buf := make([]byte, 0, size)
	seq := j.seq
	for i := range g.recs {
		r := &g.recs[i]
		buf = append(buf, `{"n":`...)
		buf = strconv.AppendUint(buf, seq+uint64(i)+1, 10)
		buf = append(buf, r.body...)
		buf = append(buf, '}', '\n')
		r.end = len(buf)
	}
	n, err := j.writeLockedN(buf)
	start := 0
	for i := range g.recs {
		r := &g.recs[i]
		if r.end > n {
			r.err = err
			continue
		}
		seq++
		r.seq = seq
		j.open[seq] = openRec{line: buf[start:r.end:r.end], has: r.parts, left: r.parts}
		start = r.end
	}
	j.seq = seq
}

// Forget drops record n from what the journal keeps in memory and in
// its rewrites, for a record that will never be batched (its audit
// entry was dropped from a full queue, and counted). Its line stays until
// the next rewrite.
func (j *Journal) Forget(n uint64) { j.ForgetPart(n, partsAll) }

// ForgetPart is Forget for part of record n only: the rest of it is
// still kept.
func (j *Journal) ForgetPart(n uint64, part Part) {
	if j == nil || n == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.doneLocked(n, part)
}

// doneLocked notes part of record n done, and drops the record once
// every part of it is; j.mu is held.
func (j *Journal) doneLocked(n uint64, part Part) {
	r, ok := j.open[n]
	if !ok {
		return
	}
	r.left &^= part
	if r.left == 0 {
		delete(j.open, n)
		return
	}
	j.open[n] = r
}

// Begin notes that the records of (their numbers; 0s are skipped) are
// going to the store as the batch key, every part of each. When the line
// cannot be written it returns the error, and the records are no longer
// kept.
func (j *Journal) Begin(key string, of []uint64) error { return j.BeginPart(key, partsAll, of) }

// BeginPart is Begin for part of each record (PartAudit or PartSettle):
// the batch takes that part, and the record is kept until its other part
// is done too.
func (j *Journal) BeginPart(key string, part Part, of []uint64) error {
	if j == nil {
		return nil
	}
	kept := make([]uint64, 0, len(of))
	for _, n := range of {
		if n != 0 {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	b, err := json.Marshal(journalLine{B: key, Of: kept, P: partName(part)})
	if err != nil {
		return fmt.Errorf("journal: encode: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.writeLocked(append(b, '\n')); err != nil {
		// The batch goes to the store all the same; its records are no
		// longer kept, and leave the file at its next rewrite. Until then
		// a recovery would apply them again: the journal's one way to
		// count a call twice, open only while its disk refuses writes
		// (and the broker refuses calls, as it cannot record).
		for _, n := range kept {
			j.doneLocked(n, part)
		}
		return err
	}
	j.batches[key] = openBatch{of: kept, part: part}
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
	b, _ := json.Marshal(journalLine{D: key})
	if err := j.writeLocked(append(b, '\n')); err != nil {
		// Kept as begun: recovery applies the batch again under its
		// key, which applies it once.
		return
	}
	delete(j.batches, key)
	for _, n := range ob.of {
		j.doneLocked(n, ob.part)
	}
	if j.size > max(j.max, 2*j.compacted) {
		j.compactLocked()
	}
}

// compactLocked rewrites the journal with only what is not yet done.
func (j *Journal) compactLocked() {
	p := filepath.Join(j.dir, journalName(j.gen))
	tmp := filepath.Join(j.dir, journalCompactName(j.gen))
	f, size, err := j.writeFresh(tmp)
	if err == nil {
		if err = os.Rename(tmp, p); err != nil {
			f.Close()
		}
	}
	if err != nil {
		j.log.Warn("journal: could not be rewritten; it goes on growing", "bytes", j.size, "err", err)
		j.compacted = j.size
		return
	}
	j.f.Close()
	j.f, j.size, j.compacted = f, size, size
}

// writeLocked appends l; j.mu is held.
func (j *Journal) writeLocked(l []byte) error {
	_, err := j.writeLockedN(l)
	return err
}

// writeLockedN appends l and returns how many of its bytes the file
// took; j.mu is held.
func (j *Journal) writeLockedN(l []byte) (int, error) {
	if j.broken {
		// A line a failed write cut off is ended first.
		if _, err := j.f.Write([]byte{'\n'}); err != nil {
			j.err = fmt.Errorf("journal: %w", err)
			return 0, j.err
		}
		j.size++
		j.broken = false
	}
	n, err := j.f.Write(l)
	j.size += int64(n)
	if err != nil {
		j.broken = n > 0 && l[n-1] != '\n'
		j.err = fmt.Errorf("journal: %w", err)
		return n, j.err
	}
	j.err = nil
	return n, nil
}

// Err is the last write's failure, nil when it succeeded: while it is not
// nil, calls answered are not journaled.
func (j *Journal) Err() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Size is the journal's size in bytes.
func (j *Journal) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}

// Pending is how many records are not yet done.
func (j *Journal) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.open)
}

// Path is the journal's file.
func (j *Journal) Path() string { return filepath.Join(j.dir, journalName(j.gen)) }

// Close closes the journal's file, giving up its lock, and removes it
// when everything it held is done. What it holds not yet done is
// recovered at the next OpenJournal (here or by another replica sharing the
// data directory).
func (j *Journal) Close() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	if len(j.open) == 0 && len(j.batches) == 0 && j.err == nil {
		// Everything it held is done: nothing to recover.
		_ = os.Remove(filepath.Join(j.dir, journalName(j.gen)))
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// recoverFile hands to put what the journal at p holds not yet done, and
// says how many records it handed on (a call's audit entry and its
// settlement count as two, in one line or in two).
func recoverFile(p string, put func(Batch) error, log *slog.Logger) (int, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	var gen, id string
	records := map[uint64]journalLine{}
	var order []uint64 // records, in the order written
	var begun []string
	batches := map[string]openBatch{}
	done := map[string]bool{}
	r := bufio.NewReader(bytes.NewReader(data))
	for {
		raw, rerr := r.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			var l journalLine
			if jerr := json.Unmarshal(raw, &l); jerr != nil {
				// A line cut off by the kill: its append never returned,
				// so its call was never answered in full.
				log.Warn("journal: a line that is no record is skipped", "bytes", len(raw))
			} else {
				switch {
				case l.Gen != "":
					gen, id = l.Gen, l.Store
				case l.N != 0 && (l.A != nil || l.T != nil):
					if _, dup := records[l.N]; !dup {
						order = append(order, l.N)
					}
					records[l.N] = l
				case l.B != "":
					if _, dup := batches[l.B]; !dup {
						begun = append(begun, l.B)
					}
					batches[l.B] = openBatch{of: l.Of, part: partOf(l.P)}
				case l.D != "":
					done[l.D] = true
				}
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	// used holds the parts of each record a batch took (handed on, or
	// done).
	used := map[uint64]Part{}
	handed := 0
	add := func(b *Batch, n uint64, part Part) {
		l, ok := records[n]
		if !ok {
			return
		}
		take := part & l.parts() &^ used[n]
		used[n] |= take
		if take&PartAudit != 0 {
			b.Audit = append(b.Audit, *l.A)
			handed++
		}
		if take&PartSettle != 0 {
			b.Settle = append(b.Settle, *l.T)
			handed++
		}
	}
	for _, key := range begun {
		if done[key] {
			ob := batches[key]
			for _, n := range ob.of {
				used[n] |= ob.part
			}
		}
	}
	for _, key := range begun {
		if done[key] {
			continue
		}
		b := Batch{Key: key, Store: id}
		ob := batches[key]
		for _, n := range ob.of {
			add(&b, n, ob.part)
		}
		if len(b.Audit)+len(b.Settle) == 0 {
			continue
		}
		if err := put(b); err != nil {
			return 0, fmt.Errorf("journal: recover: %w", err)
		}
	}
	var b Batch
	count := 0
	flush := func() error {
		if count == 0 {
			return nil
		}
		err := put(b)
		b, count = Batch{}, 0
		return err
	}
	for _, n := range order {
		if l := records[n]; l.parts()&^used[n] == 0 {
			continue
		}
		if count == 0 {
			b.Key, b.Store = recoveryKey(gen, n), id
		}
		add(&b, n, partsAll)
		count++
		if count == recoverBatch {
			if err := flush(); err != nil {
				return 0, fmt.Errorf("journal: recover: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return 0, fmt.Errorf("journal: recover: %w", err)
	}
	if handed > 0 {
		log.Info("journal: records of calls answered before the last stop handed to the spool", "records", handed)
	}
	return handed, nil
}

// recoveryKey is the key of the batch of records in no batch that begins
// at record n of the journal generation gen: the same each time the same
// journal is recovered.
func recoveryKey(gen string, n uint64) string {
	return derivedKey("journal", gen, strconv.FormatUint(n, 10))
}

// derivedKey is a batch key made from parts, joined by "/": the same
// parts make the same key, so that a batch handed on again after a crash
// is applied once (store.Spooled.ApplySpooled).
func derivedKey(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "/")))
	return hex.EncodeToString(h[:16])
}
