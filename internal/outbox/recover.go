package outbox

import (
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
	"slices"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/filelock"
)

// recoverDir recovers every journal in dir whose replica is gone (whose
// lock can be taken), removing each once recovered.
func recoverDir(dir string, put func(Batch) error, log *slog.Logger) error {
	// A rewrite cut off by a crash: the journal it was made from holds
	// everything.
	_ = eachGone(dir, "journal-*.compact", func(p string, _ *os.File) error {
		os.Remove(p)
		return nil
	})
	return eachGone(dir, JournalPattern, func(p string, f *os.File) error {
		err := recoverFile(dir, genOfName(filepath.Base(p)), f, put, log)
		if err == nil {
			err = os.Remove(p)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
}

// eachGone calls fn, until it fails, with each file in dir that pattern
// matches whose lock it can take — a journal (or a journal's rewrite)
// whose replica is gone — open and locked. A file removed meanwhile (by
// another replica) is passed over.
func eachGone(dir, pattern string, fn func(p string, f *os.File) error) error {
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	for _, p := range names {
		f, err := filelock.Open(p, os.O_RDONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		if ok, lerr := filelock.TryLock(f); lerr == nil && ok {
			// Kept when its recovery fails: narrowed first (OwnerOnly).
			if err = OwnerOnly(f); err == nil {
				err = fn(p, f)
			}
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// genOfName is the generation a journal's file name says
// (journal-<generation>.jsonl).
func genOfName(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(name, "journal-"), ".jsonl")
}

// recoverFile hands to put what the journal f, in the data directory
// dir, holds not yet done, and logs how many records it handed on (a
// call's audit entry and its settlement count as two, in one line or in
// two). A line that is no record is set aside in dir's UnreadFile. named
// is the generation the file's name says: the one its records' keys are
// made from when its header names none (damaged on the disk), so that
// two such journals do not make the same keys.
//
// The file is read a line at a time (eachLine), three times: its
// header and its batches' lines (readMarks), then where each record not
// done is (indexRecords: its offset, length and parts, never the record
// itself), then, batch by batch, the records each batch takes, each
// read from its offset as the batch is made. So a journal of gigabytes
// of records never done (a store and a spool that took none of them for
// that long) is recovered holding one batch's records at a time: a
// batch begun and not done whole, as the replica that began it held it,
// and the records in no batch recoverBatch at a time.
func recoverFile(dir, named string, f *os.File, put func(Batch) error, log *slog.Logger) error {
	m, err := readMarks(dir, f, log)
	if err != nil {
		return fmt.Errorf("journal: recover: %w", err)
	}
	if m.gen == "" {
		m.gen = named
	}
	idx, err := indexRecords(f, m.used())
	if err != nil {
		return fmt.Errorf("journal: recover: %w", err)
	}
	h := handOn{f: f, idx: idx, put: put}
	if err := h.all(m); err != nil {
		return fmt.Errorf("journal: recover: %w", err)
	}
	if h.handed > 0 {
		log.Info("journal: records of calls answered before the last stop handed to the spool", "records", h.handed)
	}
	return nil
}

// marks is what the first reading of a journal takes: its header (gen,
// and id, the store its records belong to) and its batches' lines.
type marks struct {
	gen, id string
	// begun holds the batches begun, in the order first begun, and
	// batches each one's records.
	begun   []string
	batches map[string]openBatch
	// done holds the batches done, and doneOf the records each done line
	// names (a journal written before done lines named them: none).
	done   map[string]bool
	doneOf map[string]openBatch
}

// readMarks reads f, from its start, for its header and its batches'
// lines, and sets aside in dir's UnreadFile each line that is none of the
// journal's.
func readMarks(dir string, f *os.File, log *slog.Logger) (*marks, error) {
	m := &marks{batches: map[string]openBatch{}, done: map[string]bool{}, doneOf: map[string]openBatch{}}
	// Read a line at a time (eachLine), each at most MaxLine bytes: a
	// journal of gigabytes with no newline (damaged, or put there) is
	// never held whole.
	unread := newUnreadLines(dir, "journal", log)
	err := eachLine(f, func(_ int64, raw []byte) error {
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		var l journalLine
		if json.Unmarshal(raw, &l) != nil || !l.known() || !l.intact() {
			// A line cut off by the kill (its append never returned, so
			// its call was never answered in full), or damaged (JSON,
			// but none of the journal's lines, or a batch's line its
			// checksum does not match): set aside, as it is, for an
			// operator to read. A batch whose begun line is damaged is
			// known by the line's other copy, or by its done line, which
			// names its records too; one whose newline is damaged, so
			// that the next line runs on from it, is still read.
			if err := unread.add(raw); err != nil {
				return err
			}
			var ok bool
			if l, ok = leadingMark(raw); !ok {
				return nil
			}
		}
		switch {
		case l.Gen != "":
			m.gen, m.id = l.Gen, l.Store
		case l.N != 0 && l.parts() != 0:
			// A record: indexed by the next reading.
		case l.B != "":
			if _, dup := m.batches[l.B]; !dup {
				m.begun = append(m.begun, l.B)
			}
			m.batches[l.B] = openBatch{of: l.Of, part: partOf(l.P)}
		case l.D != "":
			m.done[l.D] = true
			if len(l.Of) > 0 {
				m.doneOf[l.D] = openBatch{of: l.Of, part: partOf(l.P)}
			}
		}
		return nil
	}, func(off, n int64) error {
		longLine(log, "journal", f.Name(), off, n)
		return nil
	})
	if err := errors.Join(err, unread.flush()); err != nil {
		return nil, err
	}
	return m, nil
}

// leadingMark is the batch's line, checksummed and intact, that the
// damaged line raw begins with: a begun line's first copy, or a done
// line, whose newline was damaged, so that the next line runs on from it.
func leadingMark(raw []byte) (journalLine, bool) {
	var l journalLine
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&l) != nil || l.C == 0 || (l.B == "" && l.D == "") || !l.intact() {
		return journalLine{}, false
	}
	return l, true
}

// used is the parts of each record that a batch done took.
func (m *marks) used() map[uint64]Part {
	used := map[uint64]Part{}
	for key := range m.done {
		ob, ok := m.doneOf[key]
		if !ok {
			ob = m.batches[key]
		}
		for _, n := range ob.of {
			used[n] |= ob.part
		}
	}
	return used
}

// recordAt is where the line of a record not done is in the journal
// (its offset and length), and the parts of it no batch has taken.
type recordAt struct {
	off  int64
	size int32
	left Part
}

// recordIndex is where each record not done is: by number, and the
// numbers in the order first written. It holds no record.
type recordIndex struct {
	at    map[uint64]recordAt
	order []uint64
}

// indexRecords reads f, from its start, for where each record holding a
// part not in used is: of a record written twice, the last line of it
// holding such a part, in the place of the first.
func indexRecords(f *os.File, used map[uint64]Part) (recordIndex, error) {
	idx := recordIndex{at: map[uint64]recordAt{}}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return idx, err
	}
	err := eachLine(f, func(off int64, raw []byte) error {
		var l journalLine
		if json.Unmarshal(raw, &l) != nil || !l.known() || !l.intact() || l.Gen != "" || l.N == 0 {
			return nil // no record: set aside by readMarks, or a header
		}
		left := l.parts() &^ used[l.N]
		if left == 0 {
			return nil // none, or done
		}
		if _, dup := idx.at[l.N]; !dup {
			idx.order = append(idx.order, l.N)
		}
		idx.at[l.N] = recordAt{off: off, size: int32(len(raw)), left: left}
		return nil
	}, func(int64, int64) error { return nil })
	return idx, err
}

// handOn makes the batches a recovery hands on, reading each record
// from the journal as a batch takes it, and hands each to put before it
// reads the next batch's: it holds one batch's records at a time.
type handOn struct {
	f   *os.File
	idx recordIndex
	put func(Batch) error
	// buf is the line read last; held is how many records the batch
	// being made holds, and handed how many parts of records were
	// handed on.
	buf          []byte
	held, handed int
}

// all hands on, after m, a batch begun and not done under its own key
// (the records it names, whole: applied already or not, it applies
// once), then the records in no batch, recoverBatch at a time in the
// order written, under keys made from m.gen and their first record's
// number, the same at each recovery of the file.
func (h *handOn) all(m *marks) error {
	for _, key := range m.begun {
		if m.done[key] {
			continue
		}
		ob := m.batches[key]
		b := Batch{Key: key, Store: m.id}
		for _, n := range ob.of {
			if err := h.take(&b, n, ob.part); err != nil {
				return err
			}
		}
		if err := h.hand(b); err != nil {
			return err
		}
	}
	var b Batch
	inBatch := 0
	for _, n := range h.idx.order {
		if h.idx.at[n].left == 0 {
			continue // taken by a batch begun
		}
		if inBatch == 0 {
			b = Batch{Key: recoveryKey(m.gen, n), Store: m.id}
		}
		if err := h.take(&b, n, partsAll); err != nil {
			return err
		}
		if inBatch++; inBatch == recoverBatch {
			if err := h.hand(b); err != nil {
				return err
			}
			inBatch = 0
		}
	}
	if inBatch > 0 {
		return h.hand(b)
	}
	return nil
}

// take adds to b the parts of record n that part names and no batch has
// taken, read from the record's line.
func (h *handOn) take(b *Batch, n uint64, part Part) error {
	at, ok := h.idx.at[n]
	take := part & at.left
	if !ok || take == 0 {
		return nil
	}
	h.buf = slices.Grow(h.buf[:0], int(at.size))[:at.size]
	if _, err := h.f.ReadAt(h.buf, at.off); err != nil {
		return fmt.Errorf("record %d: %w", n, err)
	}
	var l journalLine
	if err := json.Unmarshal(h.buf, &l); err != nil || l.N != n || l.parts()&take != take {
		return fmt.Errorf("record %d: its line changed as the journal was read (%v)", n, err)
	}
	at.left &^= take
	h.idx.at[n] = at
	if take&PartAudit != 0 {
		b.Audit = append(b.Audit, *l.A)
		h.handed++
	}
	if take&PartSettle != 0 {
		b.Settle = append(b.Settle, *l.T)
		h.handed++
	}
	h.held++
	if recoverHeld != nil {
		recoverHeld(h.held)
	}
	return nil
}

// hand passes b to put, unless it holds nothing, and lets its records go.
func (h *handOn) hand(b Batch) error {
	defer func() { h.held = 0 }()
	if len(b.Audit)+len(b.Settle) == 0 {
		return nil
	}
	return h.put(b)
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
