package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// hole is how long the line of NUL bytes, with no newline, that the
// tests below put in a file is: a file extended, as a crash can leave
// one, or put there, of hundreds of MiB; sparse, so it costs no disk.
const hole = 128 << 20

// lowLineMax lowers lineMax to 1 MiB for t, so that a line past it costs
// a test little to make.
func lowLineMax(t *testing.T) {
	old := lineMax
	lineMax = 1 << 20
	t.Cleanup(func() { lineMax = old })
}

// withHole appends to the file at p the hole, then a newline and after.
func withHole(t *testing.T, p string, after []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(end + hole); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(append([]byte{'\n'}, after...), end+hole); err != nil {
		t.Fatal(err)
	}
}

// allocated is how many bytes fn allocated, in all.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// heldAtMost is what reading past a hole may allocate: a few lines of
// lineMax, far below the hole.
const heldAtMost = 32 << 20

func logTo(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

// TestReplay_AHugeLineIsNeverHeld: a spool holding a line of hundreds of
// MiB with no newline (damaged, or put there) is replayed a line at a
// time: the line is passed over, never held (the replay allocates a
// fraction of it), logged at ERROR as lost, and the batches before and
// after it are applied.
func TestReplay_AHugeLineIsNeverHeld(t *testing.T) {
	lowLineMax(t)
	dir := t.TempDir()
	var log bytes.Buffer
	s, err := OpenSpool(dir, 0, "", logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(batch("a")); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(batch("b"))
	withHole(t, filepath.Join(dir, SpoolFile), append(b, '\n'))
	st := &keyed{seen: map[string]bool{}}
	var n int
	got := allocated(func() { n, err = s.Replay(t.Context(), st.apply) })
	t.Logf("the replay allocated %d bytes past a line of %d", got, hole)
	if got > heldAtMost {
		t.Errorf("the replay allocated %d bytes past a line of %d; want at most %d", got, hole, heldAtMost)
	}
	if err != nil || n != 2 || !slices.Equal(st.applied, []string{"a", "b"}) {
		t.Errorf("Replay = %d, %v, applied %v; want a and b", n, err, st.applied)
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), fmt.Sprint("bytes=", hole+1)) {
		t.Errorf("log %q does not say, at ERROR, that the line of %d bytes is lost", log.String(), hole+1)
	}
}

// TestRecover_AHugeLineIsNeverHeld: a gone replica's journal holding a
// line of hundreds of MiB with no newline is recovered a line at a time:
// the line is passed over, never held, logged at ERROR as lost, and the
// records before and after it are recovered, each once. Its store is
// judged (Open's checkStore) reading at most a line too.
func TestRecover_AHugeLineIsNeverHeld(t *testing.T) {
	lowLineMax(t)
	dir := t.TempDir()
	j := open(t, dir, 0, nil)
	j.Audit(store.AuditEntry{Route: "r1"})
	j.Close()
	withHole(t, j.Path(), []byte(`{"n":2,"a":{"Route":"r2"}}`+"\n"))
	if err := os.WriteFile(filepath.Join(dir, SpoolFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	withHole(t, filepath.Join(dir, SpoolFile), nil)
	var log bytes.Buffer
	ks := &keyStore{}
	var o *Outbox
	var err error
	got := allocated(func() { o, err = Open(Config{Dir: dir, Store: ks, Identity: "ours", Logger: logTo(&log)}) })
	t.Logf("Open allocated %d bytes past lines of %d", got, hole)
	if got > heldAtMost {
		t.Errorf("Open allocated %d bytes past lines of %d; want at most %d", got, hole, heldAtMost)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.Replay(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ks.audit != 2 {
		t.Errorf("recovered %d audit entries, want r1 and r2", ks.audit)
	}
	if got := strings.Count(log.String(), "level=ERROR"); got != 2 {
		t.Errorf("log %q says %d lines are lost at ERROR, want the journal's and the spool's", log.String(), got)
	}
}

// TestDead_AFileLargerThanItsBoundIsNotRead: a dead-letter file larger
// than dead letters ever are (DeadMax) is refused, naming it, not read
// whole.
func TestDead_AFileLargerThanItsBoundIsNotRead(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	if err := s.SetDead(batch("a"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, DeadFile)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(DeadMax + hole); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := allocated(func() { _, err = ListDead(dir) }); got > heldAtMost {
		t.Errorf("ListDead allocated %d bytes; want at most %d", got, heldAtMost)
	}
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("ListDead of a file past DeadMax = %v, want an error naming it", err)
	}
}

// TestDead_AFileLargerThanItsBoundIsCountedUnreadable: DeadCount (what
// /readyz and boxbroker_spool_dead_letters say) of a dead-letter file
// past its bound is DeadUnreadable, never 0 as though there were no dead
// letters; and a count again once the file is readable.
func TestDead_AFileLargerThanItsBoundIsCountedUnreadable(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	if err := s.SetDead(batch("a"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	if n := s.DeadCount(); n != 1 {
		t.Fatalf("DeadCount = %d, want 1", n)
	}
	p := filepath.Join(dir, DeadFile)
	kept := mustRead(t, p)
	if err := os.Truncate(p, DeadMax+hole); err != nil {
		t.Fatal(err)
	}
	if n := s.DeadCount(); n != DeadUnreadable {
		t.Errorf("DeadCount of a file past DeadMax = %d, want DeadUnreadable (%d)", n, DeadUnreadable)
	}
	if err := os.WriteFile(p, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := s.DeadCount(); n != 1 {
		t.Errorf("DeadCount once readable again = %d, want 1", n)
	}
}
