package outbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// keyed applies batches as a store.Spooled does: once a key.
type keyed struct {
	seen    map[string]bool
	applied []string
	failAt  int // fail the call numbered failAt (from 1); 0 never
	calls   int
}

func (k *keyed) apply(_ context.Context, b Batch) error {
	k.calls++
	if k.calls == k.failAt {
		return errors.New("store down")
	}
	if !k.seen[b.Key] {
		k.seen[b.Key] = true
		k.applied = append(k.applied, b.Key)
	}
	return nil
}

func batch(key string) Batch {
	return Batch{Key: key, Settle: []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 1}}}
}

// TestReplay_ExactlyOnceAcrossAFailedReplay: a replay that stops midway
// keeps the spool set aside, and the next replay applies the rest; with
// keys, nothing is applied twice, and the spool ends empty.
func TestReplay_ExactlyOnceAcrossAFailedReplay(t *testing.T) {
	s, err := OpenSpool(t.TempDir(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := s.Append(batch(k)); err != nil {
			t.Fatal(err)
		}
	}
	st := &keyed{seen: map[string]bool{}, failAt: 2}
	if n, err := s.Replay(t.Context(), st.apply); err == nil || n != 1 {
		t.Fatalf("Replay with the store failing at the second batch = %d, %v; want 1 and an error", n, err)
	}
	if err := s.Append(batch("d")); err != nil { // appended while a replay is pending
		t.Fatal(err)
	}
	if n, err := s.Replay(t.Context(), st.apply); err != nil || n != 4 {
		t.Fatalf("second Replay = %d, %v; want 4 (a again, skipped by its key, b, c and d)", n, err)
	}
	if got := st.applied; len(got) != 4 || got[0] != "a" || got[1] != "b" || got[2] != "c" || got[3] != "d" {
		t.Errorf("applied %v, want [a b c d] once each", got)
	}
	if s.Size() != 0 {
		t.Errorf("Size after a whole replay = %d, want 0", s.Size())
	}
	if n, err := s.Replay(t.Context(), st.apply); err != nil || n != 0 {
		t.Errorf("Replay of an empty spool = %d, %v", n, err)
	}
}

// TestAppend_Bounded: a batch that would pass the bound is refused with
// ErrFull and nothing of it is kept.
func TestAppend_Bounded(t *testing.T) {
	s, err := OpenSpool(t.TempDir(), 200, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(batch("a")); err != nil {
		t.Fatal(err)
	}
	size := s.Size()
	var last error
	for range 5 {
		last = s.Append(batch("b"))
	}
	if !errors.Is(last, ErrFull) {
		t.Fatalf("Append past the bound = %v, want ErrFull", last)
	}
	if s.Size() > 200 || s.Size() < size {
		t.Errorf("Size = %d, want at most the bound", s.Size())
	}
}

// TestReplay_SkipsATornLine: a line cut off by a crash mid-append (its
// Append never returned) is skipped; the batches around it are applied.
func TestReplay_SkipsATornLine(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSpool(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(batch("a")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, SpoolFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"key":"torn","settle":[{"Box`)
	f.Close()
	s.Close()
	s, err = OpenSpool(dir, 0, "", nil) // as at a restart
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(batch("b")); err != nil { // after the restart
		t.Fatal(err)
	}
	st := &keyed{seen: map[string]bool{}}
	if n, err := s.Replay(t.Context(), st.apply); err != nil || n != 2 || len(st.applied) != 2 {
		t.Errorf("Replay with a torn line = %d, %v (applied %v), want a and b", n, err, st.applied)
	}
}

// TestAppend_DiskRefuses: when the spool's file cannot be written (here
// a directory stands where it would be, made once the spool is open:
// OpenSpool refuses one there already), Append says so.
func TestAppend_DiskRefuses(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSpool(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, SpoolFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(batch("a")); err == nil {
		t.Error("Append with no file to write = nil, want an error")
	}
}

// TestShared_AppendAfterAnotherSetItAside: two spools on one directory
// (two replicas given the same data directory): a batch one appends after
// the other has set the file aside goes to a fresh file, not to the one
// set aside (and removed once replayed), so no batch is lost.
func TestShared_AppendAfterAnotherSetItAside(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenSpool(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenSpool(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(batch("1")); err != nil {
		t.Fatal(err)
	}
	st := &keyed{seen: map[string]bool{}}
	if n, err := b.Replay(t.Context(), st.apply); err != nil || n != 1 {
		t.Fatalf("b.Replay = %d, %v; want 1", n, err)
	}
	if err := a.Append(batch("2")); err != nil { // a's open file was set aside by b
		t.Fatal(err)
	}
	if _, err := b.Replay(t.Context(), st.apply); err != nil {
		t.Fatal(err)
	}
	if len(st.applied) != 2 {
		t.Errorf("applied %v, want both batches", st.applied)
	}
}

// TestShared_AReplayNeverRemovesAnothersFile: two replicas given one
// data directory replay at once. b sets the spool aside and, while it
// applies the old batch (a slow store), a replays the same file, removes
// it, and sets aside the next, holding "new", which the store does not
// take yet (an outage): a keeps it for its next replay. b, done at last,
// once removed the file at the replay's name — a's, holding "new" — and
// the batch was lost with no line said. The bound held: replicas
// sharing a directory replay one at a time (SpoolReplayLock), so the
// file one sets aside is removed only by it; "new" is applied once the
// store takes it.
func TestShared_AReplayNeverRemovesAnothersFile(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenSpool(dir, 0, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenSpool(dir, 0, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(batch("old")); err != nil {
		t.Fatal(err)
	}
	st := &keyed{seen: map[string]bool{}}
	var mu sync.Mutex // guards st: two replays call it
	inB, release := make(chan struct{}), make(chan struct{})
	bDone := make(chan error, 1)
	go func() {
		_, err := b.Replay(t.Context(), func(ctx context.Context, x Batch) error {
			if x.Key == "old" {
				close(inB)
				<-release // a slow store
			}
			mu.Lock()
			defer mu.Unlock()
			return st.apply(ctx, x)
		})
		bDone <- err
	}()
	select {
	case <-inB:
	case err := <-bDone:
		t.Fatalf("b.Replay = %v before it applied the old batch", err)
	}
	if err := a.Append(batch("new")); err != nil {
		t.Fatal(err)
	}
	down := func(ctx context.Context, x Batch) error {
		if x.Key == "new" {
			return errors.New("store down")
		}
		mu.Lock()
		defer mu.Unlock()
		return st.apply(ctx, x)
	}
	_, _ = a.Replay(t.Context(), down) // "new" kept for the next replay
	close(release)
	if err := <-bDone; err != nil {
		t.Fatalf("b.Replay = %v", err)
	}
	up := func(ctx context.Context, x Batch) error {
		mu.Lock()
		defer mu.Unlock()
		return st.apply(ctx, x)
	}
	for _, s := range []*Spool{a, b, a} {
		if _, err := s.Replay(t.Context(), up); err != nil {
			t.Fatalf("Replay = %v", err)
		}
	}
	if !st.seen["old"] || !st.seen["new"] {
		t.Errorf("applied %v, want old and new: a batch spooled was lost", st.applied)
	}
	for _, name := range []string{SpoolFile, SpoolReplayFile} {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil && len(data) > 0 {
			t.Errorf("%s holds %q after every batch was applied", name, data)
		}
	}
}
