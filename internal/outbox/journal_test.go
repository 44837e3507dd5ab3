package outbox

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// applier stands in for the store's ApplySpooled: each key applies once.
type applier struct {
	keys   map[string]bool
	audits map[string]int // by route, how many times applied
	settle map[string]int // by box
}

func newApplier() *applier {
	return &applier{keys: map[string]bool{}, audits: map[string]int{}, settle: map[string]int{}}
}

func (a *applier) apply(b Batch) error {
	if a.keys[b.Key] {
		return nil
	}
	a.keys[b.Key] = true
	for _, e := range b.Audit {
		a.audits[e.Route]++
	}
	for _, s := range b.Settle {
		a.settle[s.Box]++
	}
	return nil
}

func open(t *testing.T, dir string, max int64, put func(Batch) error) *Journal {
	t.Helper()
	j, err := OpenJournal(dir, max, "", quiet, put)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// A replica killed after a batch was named and applied, before its done
// line: recovery applies every record exactly once, and so does a
// recovery cut short and run again.
func TestRecover_ExactlyOnceAcrossACrashBetweenBeginAndDone(t *testing.T) {
	dir := t.TempDir()
	st := newApplier()
	j := open(t, dir, 0, st.apply)
	n1, _ := j.Audit(store.AuditEntry{Route: "r1"})
	n2, _ := j.Call(nil, &store.Settlement{Box: "b1", Charge: 5})
	n3, _ := j.Audit(store.AuditEntry{Route: "r3"})
	n4, _ := j.Call(nil, &store.Settlement{Box: "b4", Charge: 7})
	n5, _ := j.Audit(store.AuditEntry{Route: "r5"})
	// Batch A: applied and done. Batch B: applied, then the kill.
	if err := j.Begin("A", []uint64{n1}); err != nil {
		t.Fatal(err)
	}
	_ = st.apply(Batch{Key: "A", Audit: []store.AuditEntry{{Route: "r1"}}})
	j.Done("A")
	if err := j.Begin("B", []uint64{n2, n3}); err != nil {
		t.Fatal(err)
	}
	_ = st.apply(Batch{Key: "B", Settle: []store.Settlement{{Box: "b1"}}, Audit: []store.AuditEntry{{Route: "r3"}}})
	_, _ = n4, n5
	j.Close() // the kill: no done line for B; n4 and n5 in no batch

	// A first recovery cut short: the second batch handed on is refused.
	var first []string
	calls := 0
	_, err := OpenJournal(dir, 0, "", quiet, func(b Batch) error {
		calls++
		if calls == 2 {
			return errors.New("disk refuses")
		}
		first = append(first, b.Key)
		return st.apply(b)
	})
	if err == nil {
		t.Fatal("Open with a put that fails: no error")
	}
	var second []string
	j2 := open(t, dir, 0, func(b Batch) error { second = append(second, b.Key); return st.apply(b) })
	if len(second) < len(first) || second[0] != first[0] {
		t.Errorf("keys of the second recovery %v do not begin with the first's %v", second, first)
	}
	for _, r := range []string{"r1", "r3", "r5"} {
		if st.audits[r] != 1 {
			t.Errorf("audit %s applied %d times, want 1", r, st.audits[r])
		}
	}
	for _, b := range []string{"b1", "b4"} {
		if st.settle[b] != 1 {
			t.Errorf("settlement %s applied %d times, want 1", b, st.settle[b])
		}
	}
	// The journal begins again empty: a third start hands nothing on.
	j2.Close()
	n := 0
	j3 := open(t, dir, 0, func(Batch) error { n++; return nil })
	_ = j3
	if n != 0 {
		t.Errorf("a start after a full recovery handed on %d batches, want 0", n)
	}
}

// A line the kill cut off is skipped; every whole record is recovered.
func TestRecover_SkipsATornLastLine(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0, nil)
	j.Audit(store.AuditEntry{Route: "r1"})
	j.Call(nil, &store.Settlement{Box: "b2"})
	j.Close()
	f, err := os.OpenFile(j.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"n":3,"a":{"Route":"r3","Bo`)
	f.Close()
	st := newApplier()
	open(t, dir, 0, st.apply)
	if st.audits["r1"] != 1 || st.settle["b2"] != 1 || st.audits["r3"] != 0 {
		t.Errorf("recovered audits %v settlements %v, want r1 and b2 once, r3 never", st.audits, st.settle)
	}
}

// The journal stays within its bound however many calls pass through
// it, and a record not yet done survives every rewrite.
func TestJournal_SizeIsBounded(t *testing.T) {
	dir := t.TempDir()
	const max = 8 << 10
	j := open(t, dir, max, nil)
	stuck, _ := j.Audit(store.AuditEntry{Route: "stuck"})
	peak := int64(0)
	for i := range 2000 {
		n, err := j.Audit(store.AuditEntry{Route: "r", Box: "box", Message: "a record of some length"})
		if err != nil {
			t.Fatal(err)
		}
		key := NewKey()
		j.Begin(key, []uint64{n})
		j.Done(key)
		if s := j.Size(); s > peak {
			peak = s
		}
		_ = i
	}
	if peak > max+1024 {
		t.Errorf("journal reached %d bytes, bound %d", peak, max)
	}
	if fi, err := os.Stat(j.Path()); err != nil || fi.Size() > max+1024 {
		t.Errorf("journal file: %v, %v", fi, err)
	}
	if j.Pending() != 1 {
		t.Errorf("Pending = %d, want 1 (record %d)", j.Pending(), stuck)
	}
	j.Close()
	st := newApplier()
	open(t, dir, max, st.apply)
	if st.audits["stuck"] != 1 || st.audits["r"] != 0 {
		t.Errorf("recovered %v, want only the stuck record", st.audits)
	}
}

// Two replicas sharing a data directory: the second's start leaves the
// first's live journal alone, and recovers it once the first is gone.
func TestShared_ALiveJournalIsNotRecovered(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, 0, nil)
	a.Audit(store.AuditEntry{Route: "a1"})
	st := newApplier()
	b := open(t, dir, 0, st.apply)
	if len(st.keys) != 0 {
		t.Fatalf("a second replica's start recovered a live journal: %v", st.audits)
	}
	b.Audit(store.AuditEntry{Route: "b1"})
	a.Close() // the first is killed
	open(t, dir, 0, st.apply)
	if st.audits["a1"] != 1 || st.audits["b1"] != 0 {
		t.Errorf("recovered %v, want only the first replica's a1", st.audits)
	}
}

// A journal whose writes fail says so in Err, which the broker reads as
// "cannot record", and records nothing it did not write.
func TestJournal_ErrWhileWritesFail(t *testing.T) {
	j := open(t, t.TempDir(), 0, nil)
	if _, err := j.Audit(store.AuditEntry{Route: "r1"}); err != nil || j.Err() != nil {
		t.Fatalf("Audit = %v, Err = %v; want nil", err, j.Err())
	}
	j.f.Close() // the disk refuses every write from now on
	if n, err := j.Call(nil, &store.Settlement{Box: "b"}); err == nil || n != 0 {
		t.Errorf("Settle on a journal that cannot write = %d, %v; want 0 and an error", n, err)
	}
	if j.Err() == nil {
		t.Error("Err = nil after a failed write")
	}
	if j.Pending() != 1 {
		t.Errorf("Pending = %d, want 1 (only the record written)", j.Pending())
	}
}

// Concurrent appends share writes (group commit), yet each gets a
// number of its own, each line is whole in the file, and a recovery
// hands on every one of them once.
func TestJournal_ConcurrentAppendsAreEachKept(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0, nil)
	const workers, each = 16, 50
	seqs := make(chan uint64, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var n uint64
				var err error
				if i%2 == 0 {
					n, err = j.Audit(store.AuditEntry{Route: "r", Box: strconv.Itoa(w)})
				} else {
					n, err = j.Call(nil, &store.Settlement{Box: strconv.Itoa(w), Charge: 1})
				}
				if err != nil || n == 0 {
					t.Errorf("append = %d, %v; want a number, nil", n, err)
				}
				seqs <- n
			}
		}()
	}
	wg.Wait()
	close(seqs)
	seen := map[uint64]bool{}
	for n := range seqs {
		if seen[n] {
			t.Fatalf("number %d given twice", n)
		}
		seen[n] = true
	}
	if got := j.Pending(); got != workers*each {
		t.Fatalf("Pending() = %d, want %d", got, workers*each)
	}
	j.Close()
	st := newApplier()
	if _, err := OpenJournal(dir, 0, "", quiet, st.apply); err != nil {
		t.Fatal(err)
	}
	settled := 0
	for _, n := range st.settle {
		settled += n
	}
	if st.audits["r"] != workers*each/2 || settled != workers*each/2 {
		t.Fatalf("recovered %d audit entries and %d settlements, want %d of each", st.audits["r"], settled, workers*each/2)
	}
}

// A write of a group cut short just before a record's newline (a full
// disk) leaves that record's line whole but for its end. The journal
// keeps it, under its number, as recovery will read it: a record the
// journal reported not taken (so its caller wrote it to the store
// itself) and a recovery then applied too was counted twice. Killed
// after its batch was applied, or before any batch, the record is
// applied once.
func TestJournal_WriteCutBeforeTheNewlineKeepsTheRecord(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched %v", batched), func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir, 0, nil)
			writeJournal = func(f *os.File, b []byte) (int, error) {
				n, _ := f.Write(b[:len(b)-1])
				return n, errors.New("no space left on device")
			}
			e := store.AuditEntry{Route: "r1"}
			n, _ := j.Audit(e)
			writeJournal = (*os.File).Write
			st := newApplier()
			switch {
			case n == 0:
				// Not journaled: the caller's queue writes it to the store.
				_ = st.apply(Batch{Key: "direct", Audit: []store.AuditEntry{e}})
			case batched:
				if err := j.Begin("A", []uint64{n}); err != nil {
					t.Fatal(err)
				}
				_ = st.apply(Batch{Key: "A", Audit: []store.AuditEntry{e}})
				j.Done("A")
			}
			j.Close() // the kill
			open(t, dir, 0, st.apply)
			if st.audits["r1"] != 1 {
				t.Errorf("r1 applied %d times, want once", st.audits["r1"])
			}
		})
	}
}

// killedAfterTheStoreTook leaves in dir the journal of a replica killed
// after the store (st) took the batch key, of the audit entry r1 and
// the settlement b2 (r3 is in no batch), with its done line written when
// done, and returns the journal's path and what it holds.
func killedAfterTheStoreTook(t *testing.T, dir string, st *applier, key string, done bool) (string, string) {
	t.Helper()
	j := open(t, dir, 0, st.apply)
	n1, _ := j.Audit(store.AuditEntry{Route: "r1"})
	n2, _ := j.Call(nil, &store.Settlement{Box: "b2", Charge: 5})
	j.Audit(store.AuditEntry{Route: "r3"})
	if err := j.Begin(key, []uint64{n1, n2}); err != nil {
		t.Fatal(err)
	}
	_ = st.apply(Batch{Key: key, Audit: []store.AuditEntry{{Route: "r1"}}, Settle: []store.Settlement{{Box: "b2"}}})
	if done {
		j.Done(key)
	}
	j.Close() // the kill
	data, err := os.ReadFile(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	return j.Path(), string(data)
}

// A batch's begun or done line damaged on the disk — cut short, a byte
// flipped so that it is no JSON, or one flipped so that it still is and
// names another key or other records — makes recovery apply none of the
// batch's records twice, and loses none of the records in no batch.
func TestRecover_ADamagedBatchLineAppliesNothingTwice(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name   string
		marker string // the line damaged: the one holding this
		damage func(line string) string
	}{
		{"begun line cut short", `"b":"`, func(l string) string { return l[:len(l)/2] }},
		{"begun line no JSON", `"b":"`, func(l string) string { return strings.Replace(l, `"of":[`, `"of":{`, 1) }},
		{"begun line names another key", `"b":"`, func(l string) string { return strings.Replace(l, key, "f"+key[1:], 1) }},
		{"begun line names no records", `"b":"`, func(l string) string { return strings.Replace(l, `"of":`, `"og":`, 1) }},
		{"done line cut short", `"d":"`, func(l string) string { return l[:len(l)/2] }},
		{"done line names another record", `"d":"`, func(l string) string { return strings.Replace(l, `"of":[1,2]`, `"of":[1,3]`, 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			st := newApplier()
			p, data := killedAfterTheStoreTook(t, dir, st, key, true)
			lines := strings.SplitAfter(data, "\n")
			damaged := false
			for i, l := range lines {
				if strings.Contains(l, tt.marker) {
					if d := tt.damage(strings.TrimSuffix(l, "\n")) + "\n"; d != l {
						lines[i], damaged = d, true
					}
				}
			}
			if !damaged {
				t.Fatalf("no line holding %s to damage in %s", tt.marker, data)
			}
			if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			open(t, dir, 0, st.apply)
			if st.audits["r1"] != 1 || st.settle["b2"] != 1 || st.audits["r3"] != 1 {
				t.Errorf("applied audits %v settlements %v, want r1, b2 and r3 once each", st.audits, st.settle)
			}
		})
	}
}

// A batch's begun line is written twice, each copy with its checksum:
// a byte flipped on the disk in one copy (or in the newline between
// them, running the two together) leaves the other, so a batch the store
// took before the kill, with no done line, is handed on under its key
// and applied once. With both copies damaged, the batch's records are in
// no batch, handed on under keys of the journal's, and the store applies
// the batch it took again (the gap docs/reliability.md names). A journal
// written with one copy recovers as it did.
func TestRecover_ABegunLineWithOneCopyDamagedAppliesOnce(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	flip := func(l string) string { b := []byte(l); b[len(b)/2] ^= 1; return string(b) }
	tests := []struct {
		name string
		// edit changes the begun line's copies (each with its newline).
		edit  func(copies []string) []string
		twice bool // r1 and b2 applied twice: once before the kill, once after
	}{
		{"first copy damaged", func(c []string) []string { return []string{flip(c[0]), c[1]} }, false},
		{"second copy damaged", func(c []string) []string { return []string{c[0], flip(c[1])} }, false},
		{"newline between the copies damaged", func(c []string) []string {
			return []string{strings.TrimSuffix(c[0], "\n") + "\x0b", c[1]}
		}, false},
		{"both copies damaged", func(c []string) []string { return []string{flip(c[0]), flip(c[1])} }, true},
		{"one copy, as a journal written before", func(c []string) []string { return c[:1] }, false},
		{"one copy, damaged", func(c []string) []string { return []string{flip(c[0])} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			st := newApplier()
			// The kill comes before the batch's done line.
			p, data := killedAfterTheStoreTook(t, dir, st, key, false)
			var kept, copies []string
			for _, l := range strings.SplitAfter(data, "\n") {
				if strings.Contains(l, `"b":"`) {
					copies = append(copies, l)
				} else {
					kept = append(kept, l)
				}
			}
			if len(copies) != 2 {
				t.Fatalf("begun lines = %q, want two copies", copies)
			}
			kept = append(kept, tt.edit(copies)...)
			if err := os.WriteFile(p, []byte(strings.Join(kept, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			open(t, dir, 0, st.apply)
			want := 1
			if tt.twice {
				want = 2
			}
			if st.audits["r1"] != want || st.settle["b2"] != want || st.audits["r3"] != 1 {
				t.Errorf("applied audits %v settlements %v, want r1 and b2 %d times, r3 once", st.audits, st.settle, want)
			}
		})
	}
}
