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
// has taken it, a line says it is done (Done), naming its records again,
// so that either line tells recovery which records the batch took. A
// batch whose begun line cannot be written does not go to the store: the
// journal holds it (Hold) and hands it on once it can write that line
// (Retry), for a recovery would hand its records on again under keys of
// its own. Both
// lines carry a checksum: a line damaged on the disk (a flipped byte
// that leaves it JSON) is set aside like one cut off, never read as
// naming other records or another key.
//
// Each replica writes a journal of its own, journal-<generation>.jsonl,
// and holds a lock on it (flock) for its life. OpenJournal recovers every
// journal in the directory whose lock it can take — its replica is gone
// — and removes it: a batch begun and not done is handed on under its
// own key (applied already or not, it applies once), and the records in
// no batch under keys made from the journal's generation and their
// sequence numbers, so that a recovery cut short and run again hands
// them on under the same keys. A journal past its bound is rewritten
// with only the records not yet done, in the order written. A journal's first line names its
// generation and the store its records belong to, and the batches it
// hands on name that store too.

package outbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/intentius/boxbroker/internal/defaults"
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

// DefaultMaxHeld bounds the records (settlements and audit entries) that
// batches held in memory only keep (Keep, when the journal cannot write
// them): past it Keep refuses, and Err says so, so that no call is
// served whose records could not be kept. A budgeted call's settlement
// is a few hundred bytes: some tens of MiB in all.
const DefaultMaxHeld = 1 << 16

// ErrHeldFull is what Keep returns, holding nothing more, and Err while
// the records held in memory only are at their bound (DefaultMaxHeld).
var ErrHeldFull = errors.New("journal: the records held in memory while it cannot write are at their bound")

// recoverBatch bounds the records handed on in one batch at recovery; a
// test lowers it.
var recoverBatch = 256

// recoverHeld, when not nil, is told how many records a recovery holds
// decoded each time it decodes one: a test's count.
var recoverHeld func(held int)

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
	// C is a batch's line's checksum: the CRC-32 (IEEE) of the line
	// as encoded without it (0: none, as in a journal written before
	// batches' lines had one).
	C uint32 `json:"c,omitempty"`
}

// markerLine is l, a batch begun or done, encoded with its checksum and
// ended with a newline.
func markerLine(l journalLine) ([]byte, error) { return markerLines(l, 1) }

// begunLines is the line naming the batch key begun, taking part of the
// records of, written twice, each copy with its checksum: recovery reads
// whichever copy is intact, so that a byte of one damaged on the disk
// does not lose which records the key took (readMarks).
func begunLines(key string, of []uint64, part Part) ([]byte, error) {
	return markerLines(journalLine{B: key, Of: of, P: partNames[part]}, 2)
}

// markerLines is markerLine's line, copies times over.
func markerLines(l journalLine, copies int) ([]byte, error) {
	l.C = 0
	b, err := json.Marshal(&l)
	if err != nil {
		return nil, fmt.Errorf("journal: encode: %w", err)
	}
	l.C = crc32.ChecksumIEEE(b)
	if b, err = json.Marshal(&l); err != nil {
		return nil, fmt.Errorf("journal: encode: %w", err)
	}
	b = append(b, '\n')
	line := len(b)
	for range copies - 1 {
		b = append(b, b[:line]...)
	}
	return b, nil
}

// intact reports whether l, as read, matches its checksum (a line with
// none matches).
func (l *journalLine) intact() bool {
	if l.C == 0 {
		return true
	}
	c := l.C
	l.C = 0
	b, err := json.Marshal(l)
	l.C = c
	return err == nil && crc32.ChecksumIEEE(b) == c
}

// Part is a part of a record a batch takes: its audit entry or its
// settlement, or both.
type Part uint8

const (
	PartAudit  Part = 1 << iota // the audit entry
	PartSettle                  // the settlement
	partsAll   = PartAudit | PartSettle
)

// partNames are the parts' names in a batch's line ("" for both), and
// partOf the part a line's name says.
var partNames = [...]string{PartAudit: "a", PartSettle: "t", partsAll: ""}

func partOf(name string) Part {
	for p, n := range partNames {
		if n != "" && n == name {
			return Part(p)
		}
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

// known reports whether l is one of the journal's lines: a header, a
// record holding a part, a batch begun or a batch done.
func (l *journalLine) known() bool {
	return l.Gen != "" || (l.N != 0 && l.parts() != 0) || l.B != "" || l.D != ""
}

// openRec is a record not yet done: its line, the parts the line holds,
// and those of them not yet done.
type openRec struct {
	line      []byte
	has, left Part
}

// openBatch is a batch begun and not done: its records, and the part of
// each it takes. unwritten is set while its begun line is not in the
// file (its write failed: Retry writes it before it hands the batch on),
// and held, when set, is the batch as its caller made it (Hold), which
// Retry hands on in place of its records.
type openBatch struct {
	of        []uint64
	part      Part
	unwritten bool
	held      *Batch
	// only is how many of held's records the journal holds in memory
	// only (Keep could not write them).
	only int
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
	// failed holds the batches begun and not done that neither the store
	// nor the spool took (Failed), for Retry to hand on again.
	failed map[string]bool
	// broken is set when a write failed, so that the next line begins a
	// line of its own; err is the last write's failure, nil once one
	// succeeds.
	broken bool
	err    error
	// only is how many records the batches held keep in memory only
	// (openBatch.only), at most maxHeld.
	only, maxHeld int
}

// OpenJournal opens the journal in dir, bounded to max bytes
// (DefaultJournalMax when zero or less), for the records of the store
// whose identity is id ("": unnamed). What a process before left in it is
// first handed to put, batch by batch (to be spooled and applied once),
// each batch naming the store its journal named; OpenJournal returns an
// error, keeping the journal, when put refuses one.
func OpenJournal(dir string, max int64, id string, log *slog.Logger, put func(Batch) error) (*Journal, error) {
	defaults.Positive(&max, DefaultJournalMax)
	defaults.Logger(&log)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := recoverDir(dir, put, log); err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, max: max, log: log, gen: NewKey(), store: id, open: map[uint64]openRec{}, batches: map[string]openBatch{}, failed: map[string]bool{},
		maxHeld: DefaultMaxHeld}
	j.written = sync.NewCond(&j.gmu)
	if err := j.rewrite(); err != nil {
		return nil, err
	}
	return j, nil
}

// rewrite writes this replica's journal afresh, locked, with its header
// and only what is not yet done (writeFresh), and puts it in place of
// the one open, if any; j.mu is held (or j is not yet shared). The
// journal open is kept when the new one cannot be put in its place.
func (j *Journal) rewrite() error {
	tmp := filepath.Join(j.dir, journalCompactName(j.gen))
	f, size, err := j.writeFresh(tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(j.dir, journalName(j.gen))); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.size, j.compacted = f, size, size
	for key, b := range j.batches {
		if b.unwritten {
			b.unwritten = false // writeFresh wrote its begun line
			j.batches[key] = b
		}
	}
	return nil
}

// writeFresh writes, to a new file at p, locked, the header and the
// lines of the records and batches not yet done, synced; j.mu is held
// (or j is not yet shared).
func (j *Journal) writeFresh(p string) (*os.File, int64, error) {
	f, err := filelock.Open(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, FileMode)
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
	// In the order written (their numbers'), which recovery keeps.
	for _, n := range slices.Sorted(maps.Keys(j.open)) {
		w.Write(j.open[n].lineLeft())
	}
	for key, b := range j.batches {
		if len(b.of) == 0 {
			continue // held in memory only (Keep)
		}
		l, _ := begunLines(key, b.of, b.part)
		w.Write(l)
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

// ForgetPart drops part of record n from what the journal keeps in
// memory and in its rewrites, for a part that will never be batched (an
// audit entry dropped from a full queue, and counted); the rest of the
// record is still kept. Its line stays until the next rewrite.
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

// writeLocked appends l and returns how many of its bytes the file
// took; j.mu is held.
func (j *Journal) writeLocked(l []byte) (int, error) {
	if j.broken {
		// A line a failed write cut off is ended first.
		if _, err := j.f.Write([]byte{'\n'}); err != nil {
			j.err = fmt.Errorf("journal: %w", err)
			return 0, j.err
		}
		j.size++
		j.broken = false
	}
	n, err := writeJournal(j.f, l)
	j.size += int64(n)
	if err != nil {
		j.broken = n > 0 && l[n-1] != '\n'
		j.err = fmt.Errorf("journal: %w", err)
		return n, j.err
	}
	j.err = nil
	return n, nil
}

// writeJournal is the journal's write: f.Write; a test replaces it.
var writeJournal = (*os.File).Write

// Err is the last write's failure, nil when it succeeded: while it is not
// nil, calls answered are not journaled. While the records held in
// memory only are at their bound, it is ErrHeldFull (joined with the
// last write's failure, if any).
func (j *Journal) Err() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.only >= j.maxHeld {
		return errors.Join(fmt.Errorf("%w (%d)", ErrHeldFull, j.maxHeld), j.err)
	}
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
	held := 0
	for _, b := range j.batches {
		if b.held != nil {
			held++
		}
	}
	if held > 0 {
		j.log.Error("journal: batches held in memory, not yet handed on, are lost with this process but for the records the journal wrote (recovered at the next start)", "batches", held)
	}
	if len(j.open) == 0 && len(j.batches) == 0 && j.err == nil {
		// Everything it held is done: nothing to recover.
		_ = os.Remove(filepath.Join(j.dir, journalName(j.gen)))
	}
	err := j.f.Close()
	j.f = nil
	return err
}
