package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/outbox/outboxtest"
	"github.com/intentius/boxbroker/internal/store"
)

// lineKeys reads the file at p as JSON lines, each a T whose key is
// key(T), and returns the keys in order; a line that is not a whole T
// with a key fails t.
func lineKeys[T any](t *testing.T, p string, key func(T) string) []string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for line := range bytes.Lines(data) {
		var v T
		if err := json.Unmarshal(line, &v); err != nil || key(v) == "" || line[len(line)-1] != '\n' {
			t.Fatalf("%s holds %q, which is no whole line (%v)", filepath.Base(p), line, err)
		}
		keys = append(keys, key(v))
	}
	return keys
}

// TestSpool_FailedAppendLeavesNoPart: an append to the spool whose write
// fails part way (a full disk) leaves none of its batch behind: Append
// fails, the same batch appended again is kept once, the batches after it
// are whole lines, and the spool's size is its file's.
func TestSpool_FailedAppendLeavesNoPart(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	if err := s.Append(batch("a")); err != nil {
		t.Fatal(err)
	}
	restore := outboxtest.FailAppendsAfter(20)
	if err := s.Append(batch("b")); err == nil {
		t.Fatal("Append with a failing write = nil, want its error")
	}
	restore()
	for _, k := range []string{"b", "c"} {
		if err := s.Append(batch(k)); err != nil {
			t.Fatalf("Append %s after the failed write: %v", k, err)
		}
	}
	p := filepath.Join(dir, SpoolFile)
	if got := lineKeys(t, p, func(b Batch) string { return b.Key }); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("spool holds %v, want [a b c]", got)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != s.Size() {
		t.Errorf("Size() = %d, want the file's size (%v)", s.Size(), fi)
	}
}

// TestDead_FailedAppendLeavesNoPart: a dead letter whose write fails part
// way leaves none of it behind: SetDead fails, the same batch set aside
// again is kept once, and the letters after it are whole lines.
func TestDead_FailedAppendLeavesNoPart(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	if err := s.SetDead(batch("a"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	restore := outboxtest.FailAppendsAfter(20)
	if err := s.SetDead(batch("b"), store.ErrRejected); err == nil {
		t.Fatal("SetDead with a failing write = nil, want its error")
	}
	restore()
	for _, k := range []string{"b", "c"} {
		if err := s.SetDead(batch(k), store.ErrRejected); err != nil {
			t.Fatalf("SetDead %s after the failed write: %v", k, err)
		}
	}
	if got := lineKeys(t, filepath.Join(dir, DeadFile), func(d Dead) string { return d.ID }); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("dead letters hold %v, want [a b c]", got)
	}
}

// TestDead_LetterAfterATornLineIsKept: a dead letter set aside after a
// line a crash cut off (its SetDead never returned; its batch is still in
// the spool) begins a line of its own: it is listed, and kept when
// another letter is dropped.
func TestDead_LetterAfterATornLineIsKept(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	if err := s.SetDead(batch("a"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, DeadFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"torn","at":"2026-`)
	f.Close()
	if err := s.SetDead(batch("b"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	if _, err := DropDead(dir, "a"); err != nil {
		t.Fatal(err)
	}
	list, err := ListDead(dir)
	if err != nil || len(list) != 1 || list[0].ID != "b" {
		t.Errorf("ListDead after a torn line and a drop = %v, %v; want b", list, err)
	}
}

// TestFiles_NamesReachTheDisk: a file the spool or the dead letters make,
// and one WriteFile puts in place, has its directory synced, so that its
// name outlives a power cut as its synced lines do; a directory that
// cannot be synced fails the write, which then counts as not kept.
func TestFiles_NamesReachTheDisk(t *testing.T) {
	tests := []struct {
		name  string
		write func(dir string) error
	}{
		{"spool", func(dir string) error {
			s, err := OpenSpool(dir, 0, "", quiet)
			if err != nil {
				return err
			}
			defer s.Close()
			return s.Append(batch("a"))
		}},
		{"dead letters", func(dir string) error {
			s, err := OpenSpool(dir, 0, "", quiet)
			if err != nil {
				return err
			}
			defer s.Close()
			return s.SetDead(batch("a"), store.ErrRejected)
		}},
		{"WriteFile", func(dir string) error { return WriteFile(filepath.Join(dir, "state.json"), []byte("{}")) }},
	}
	keep := syncDir
	defer func() { syncDir = keep }()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var synced []string
			syncDir = func(d string) error {
				synced = append(synced, d)
				return errors.New("input/output error")
			}
			if err := tt.write(dir); err == nil {
				t.Errorf("%s with its directory not synced = nil, want the error", tt.name)
			}
			if !slices.Contains(synced, dir) {
				t.Errorf("%s synced directories %q, want %q", tt.name, synced, dir)
			}
		})
	}
}

// TestReplay_SetsAsideALineItCannotRead: a whole line of the spool that
// is no batch (damaged on the disk) is set aside, as it was, in
// UnreadFile, once however often the spool is replayed; the batches
// around it are applied.
func TestReplay_SetsAsideALineItCannotRead(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	const bad = `{"key":"damaged","settle":"7"}` + "\n"
	if err := s.Append(batch("a")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SpoolFile), append(mustRead(t, filepath.Join(dir, SpoolFile)), bad...), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Append(batch("b")); err != nil {
		t.Fatal(err)
	}
	st := &keyed{seen: map[string]bool{}, failAt: 2} // the first replay stops at b
	if _, err := s.Replay(t.Context(), st.apply); err == nil {
		t.Fatal("Replay with the store failing at b = nil, want its error")
	}
	if n, err := s.Replay(t.Context(), st.apply); err != nil || !slices.Equal(st.applied, []string{"a", "b"}) {
		t.Fatalf("Replay = %d, %v (applied %v), want a and b", n, err, st.applied)
	}
	if got := string(mustRead(t, filepath.Join(dir, UnreadFile))); got != bad {
		t.Errorf("%s holds %q, want the damaged line once", UnreadFile, got)
	}
}

// TestRecover_SetsAsideALineItCannotRead: a line of a journal that is
// none of its lines is set aside, as it was, in UnreadFile; the records
// around it are recovered.
func TestRecover_SetsAsideALineItCannotRead(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0, nil)
	j.Audit(store.AuditEntry{Route: "r1"})
	j.Close()
	// A line that is no JSON, and one that is but none of the
	// journal's (a record's part damaged out of its name).
	const bad = `{"n":2,"a":{"Route":"r2","Box":` + "\n" + `{"n":3,"x":{"Route":"r3"}}` + "\n"
	if err := os.WriteFile(j.Path(), append(mustRead(t, j.Path()), bad...), 0o600); err != nil {
		t.Fatal(err)
	}
	st := newApplier()
	open(t, dir, 0, st.apply)
	if st.audits["r1"] != 1 {
		t.Errorf("recovered audits %v, want r1 once", st.audits)
	}
	if got := string(mustRead(t, filepath.Join(dir, UnreadFile))); got != bad {
		t.Errorf("%s holds %q, want the lines that are no record", UnreadFile, got)
	}
}

// openSpool opens the spool in dir, closed when t ends.
func openSpool(t *testing.T, dir string) *Spool {
	t.Helper()
	s, err := OpenSpool(dir, 0, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDead_RewriteSetsAsideALineItCannotRead: dropping a dead letter
// rewrites the file with the letters left; a line in it that is no dead
// letter (damaged on the disk) is set aside in UnreadFile first, not
// dropped with the letter.
func TestDead_RewriteSetsAsideALineItCannotRead(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	if err := s.SetDead(batch("a"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	const bad = `{"id":"damaged","batch":7}` + "\n"
	p := filepath.Join(dir, DeadFile)
	if err := os.WriteFile(p, append(mustRead(t, p), bad...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDead(batch("b"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	if _, err := DropDead(dir, "a"); err != nil {
		t.Fatal(err)
	}
	if list, err := ListDead(dir); err != nil || len(list) != 1 || list[0].ID != "b" {
		t.Errorf("ListDead after the drop = %v, %v; want b", list, err)
	}
	if got := string(mustRead(t, filepath.Join(dir, UnreadFile))); got != bad {
		t.Errorf("%s holds %q, want the damaged line", UnreadFile, got)
	}
}

// TestClose_SaysWhatTheAuditQueueStillHolds: an audit entry queued once
// the Writer has stopped (a call that ends after the audit log did) is
// not written; Close says so at ERROR, with how many.
func TestClose_SaysWhatTheAuditQueueStillHolds(t *testing.T) {
	var logs bytes.Buffer
	o, err := Open(Config{Dir: t.TempDir(), Store: &fakeStore{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	o.Add(store.AuditEntry{Route: "late"}) // no Run: as after it returned
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "entries=1") {
		t.Errorf("Close with an entry queued logged %q, want an ERROR line counting it", got)
	}
}

// TestRecover_JournalsWithDamagedHeadersKeepApart: two journals whose
// first line (the header naming their generation) is damaged on the
// disk are each recovered whole: the keys of their records in no batch
// are made from the generation their file is named by, so one
// journal's record 1 is not taken for the other's, applied already.
func TestRecover_JournalsWithDamagedHeadersKeepApart(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, 0, nil)
	b := open(t, dir, 0, nil) // a second replica sharing the directory
	a.Audit(store.AuditEntry{Route: "r-a"})
	b.Audit(store.AuditEntry{Route: "r-b"})
	a.Close()
	b.Close()
	for _, j := range []*Journal{a, b} {
		data := mustRead(t, j.Path())
		_, rest, _ := bytes.Cut(data, []byte{'\n'})
		if err := os.WriteFile(j.Path(), append([]byte("{\"gen\":\x00\x00\x00\n"), rest...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st := newApplier()
	open(t, dir, 0, st.apply)
	if st.audits["r-a"] != 1 || st.audits["r-b"] != 1 {
		t.Errorf("recovered audits %v, want r-a and r-b once each", st.audits)
	}
}
