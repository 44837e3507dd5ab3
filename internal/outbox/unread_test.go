package outbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// countAppends counts, until t ends, the appends to UnreadFile (each
// one read of it and one fsync).
func countAppends(t testing.TB) *int {
	t.Helper()
	n := 0
	was := appendUnread
	appendUnread = func(f *os.File, b []byte) (int64, error) {
		n++
		return was(f, b)
	}
	t.Cleanup(func() { appendUnread = was })
	return &n
}

// damaged is n lines that are no batch nor record, each once, and the
// first of them again: the file they make, and what UnreadFile holds
// once they are set aside.
func damaged(n int) (file, want []byte) {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "{\"damaged\":%d\n", i)
	}
	want = bytes.Clone(b.Bytes())
	fmt.Fprintf(&b, "{\"damaged\":%d\n", 0)
	return b.Bytes(), want
}

// TestReplay_DamagedLinesSetAsideTogether: a spool of many damaged
// lines has them set aside in UnreadFile with one append (one read of
// the file, one fsync), not one a line; each is there once, in order,
// and the batches around them are applied.
func TestReplay_DamagedLinesSetAsideTogether(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	appends := countAppends(t)
	if err := s.Append(batch("a")); err != nil {
		t.Fatal(err)
	}
	bad, want := damaged(1000)
	p := filepath.Join(dir, SpoolFile)
	if err := os.WriteFile(p, append(mustRead(t, p), bad...), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Append(batch("b")); err != nil {
		t.Fatal(err)
	}
	st := &keyed{seen: map[string]bool{}}
	if n, err := s.Replay(t.Context(), st.apply); err != nil || !slices.Equal(st.applied, []string{"a", "b"}) {
		t.Fatalf("Replay = %d, %v (applied %v), want a and b", n, err, st.applied)
	}
	if *appends != 1 {
		t.Errorf("%d appends to %s for 1000 damaged lines, want 1", *appends, UnreadFile)
	}
	if got := mustRead(t, filepath.Join(dir, UnreadFile)); !bytes.Equal(got, want) {
		t.Errorf("%s holds %d bytes, want the %d of the damaged lines once each", UnreadFile, len(got), len(want))
	}
}

// TestRecover_DamagedLinesSetAsideTogether: so for a journal's
// recovery.
func TestRecover_DamagedLinesSetAsideTogether(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0, nil)
	j.Audit(store.AuditEntry{Route: "r1"})
	j.Close()
	appends := countAppends(t)
	bad, want := damaged(1000)
	if err := os.WriteFile(j.Path(), append(mustRead(t, j.Path()), bad...), 0o600); err != nil {
		t.Fatal(err)
	}
	st := newApplier()
	open(t, dir, 0, st.apply)
	if st.audits["r1"] != 1 {
		t.Errorf("recovered audits %v, want r1 once", st.audits)
	}
	if *appends != 1 {
		t.Errorf("%d appends to %s for 1000 damaged lines, want 1", *appends, UnreadFile)
	}
	if got := mustRead(t, filepath.Join(dir, UnreadFile)); !bytes.Equal(got, want) {
		t.Errorf("%s holds %d bytes, want the %d of the damaged lines once each", UnreadFile, len(got), len(want))
	}
}

// TestUnread_FlushedInBoundedPieces: the lines gathered are set aside
// whenever they reach unreadFlushAt bytes, so no more are held; none is
// lost nor set aside twice, across the pieces or across readings.
func TestUnread_FlushedInBoundedPieces(t *testing.T) {
	was := unreadFlushAt
	unreadFlushAt = 100
	t.Cleanup(func() { unreadFlushAt = was })
	dir := t.TempDir()
	appends := countAppends(t)
	bad, want := damaged(50)
	for range 2 { // the same file read again sets nothing aside twice
		u := newUnreadLines(dir, "spool", quiet)
		for l := range bytes.Lines(bad) {
			if err := u.add(l); err != nil {
				t.Fatal(err)
			}
			if u.size >= 100 {
				t.Fatalf("%d bytes held, want fewer than %d", u.size, unreadFlushAt)
			}
		}
		if err := u.flush(); err != nil {
			t.Fatal(err)
		}
	}
	if *appends < 2 || *appends > len(bad)/100+1 {
		t.Errorf("%d appends for %d bytes flushed every 100, want about %d", *appends, len(bad), len(bad)/100)
	}
	if got := mustRead(t, filepath.Join(dir, UnreadFile)); !bytes.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", UnreadFile, got, want)
	}
}

// BenchmarkReplay_DamagedLines: a replay of a spool of n short damaged
// lines and nothing else, each set aside in UnreadFile.
func BenchmarkReplay_DamagedLines(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bad, _ := damaged(n)
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				if err := os.WriteFile(filepath.Join(dir, SpoolFile), bad, 0o600); err != nil {
					b.Fatal(err)
				}
				s, err := OpenSpool(dir, 0, "", quiet)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st := &keyed{seen: map[string]bool{}}
				if _, err := s.Replay(b.Context(), st.apply); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Close()
				if fi, err := os.Stat(filepath.Join(dir, UnreadFile)); err != nil || fi.Size() != int64(len(bad)-len(strings.SplitAfter(string(bad), "\n")[0])) {
					b.Fatalf("%s: %v, %v", UnreadFile, fi, err)
				}
				b.StartTimer()
			}
		})
	}
}
