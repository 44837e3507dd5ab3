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
func recoverFile(dir, named string, f *os.File, put func(Batch) error, log *slog.Logger) error {
	var gen, id string
	records := map[uint64]journalLine{}
	var order []uint64 // records, in the order written
	var begun []string
	batches := map[string]openBatch{}
	// done holds the batches done, and doneOf the records each done line
	// names (a journal written before done lines named them: none).
	done := map[string]bool{}
	doneOf := map[string]openBatch{}
	// Read a line at a time (eachLine), each at most MaxLine bytes: a
	// journal of gigabytes with no newline (damaged, or put there) is
	// never held whole. The first reading takes its header and its
	// batches' lines; the second its records, holding only those not
	// yet done (a journal not rewritten for long holds many that are).
	unread := newUnreadLines(dir, "journal", log)
	err := eachLine(f, func(_ int64, raw []byte) error {
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		var l journalLine
		switch {
		case json.Unmarshal(raw, &l) != nil, !l.known(), !l.intact():
			// A line cut off by the kill (its append never returned, so
			// its call was never answered in full), or damaged (JSON,
			// but none of the journal's lines, or a batch's line its
			// checksum does not match): set aside, as it is, for an
			// operator to read. A batch whose begun line is damaged is
			// known by its done line, which names its records too.
			if uerr := unread.add(raw); uerr != nil {
				return uerr
			}
		case l.Gen != "":
			gen, id = l.Gen, l.Store
		case l.N != 0 && l.parts() != 0:
			// A record: read again below.
		case l.B != "":
			if _, dup := batches[l.B]; !dup {
				begun = append(begun, l.B)
			}
			batches[l.B] = openBatch{of: l.Of, part: partOf(l.P)}
		case l.D != "":
			done[l.D] = true
			if len(l.Of) > 0 {
				doneOf[l.D] = openBatch{of: l.Of, part: partOf(l.P)}
			}
		}
		return nil
	}, func(off, n int64) error {
		longLine(log, "journal", f.Name(), off, n)
		return nil
	})
	err = errors.Join(err, unread.flush())
	if err != nil {
		return fmt.Errorf("journal: recover: %w", err)
	}
	if gen == "" {
		gen = named
	}
	// used holds the parts of each record a batch took (handed on, or
	// done).
	used := map[uint64]Part{}
	for key := range done {
		ob, ok := doneOf[key]
		if !ok {
			ob = batches[key]
		}
		for _, n := range ob.of {
			used[n] |= ob.part
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("journal: recover: %w", err)
	}
	err = eachLine(f, func(_ int64, raw []byte) error {
		var l journalLine
		if json.Unmarshal(raw, &l) != nil || !l.known() || !l.intact() || l.Gen != "" || l.N == 0 || l.parts()&^used[l.N] == 0 {
			return nil // no record (set aside above, or a header), or one done
		}
		if _, dup := records[l.N]; !dup {
			order = append(order, l.N)
		}
		records[l.N] = l
		return nil
	}, func(int64, int64) error { return nil })
	if err != nil {
		return fmt.Errorf("journal: recover: %w", err)
	}
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
	// A batch begun and not done is handed on under its own key; the
	// records in no batch, recoverBatch at a time, under keys made from
	// their numbers.
	var out []Batch
	for _, key := range begun {
		if done[key] {
			continue
		}
		b := Batch{Key: key, Store: id}
		ob := batches[key]
		for _, n := range ob.of {
			add(&b, n, ob.part)
		}
		if len(b.Audit)+len(b.Settle) > 0 {
			out = append(out, b)
		}
	}
	var rest []uint64
	for _, n := range order {
		if l := records[n]; l.parts()&^used[n] != 0 {
			rest = append(rest, n)
		}
	}
	for chunk := range slices.Chunk(rest, recoverBatch) {
		b := Batch{Key: recoveryKey(gen, chunk[0]), Store: id}
		for _, n := range chunk {
			add(&b, n, partsAll)
		}
		out = append(out, b)
	}
	for _, b := range out {
		if err := put(b); err != nil {
			return fmt.Errorf("journal: recover: %w", err)
		}
	}
	if handed > 0 {
		log.Info("journal: records of calls answered before the last stop handed to the spool", "records", handed)
	}
	return nil
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
