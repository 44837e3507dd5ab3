//go:build unix

package auditsink_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSink_WiderFilesAreNarrowedAtOpen: the sink's state and backlog,
// found readable by others (0644: an older boxbroker, a restored backup),
// are made 0600 when the sink is opened; the backlog's rows are kept.
func TestSink_WiderFilesAreNarrowedAtOpen(t *testing.T) {
	dir := t.TempDir()
	_, u := newReceiver(t, 0)
	s := open(t, dir, u, nil, 0, 5)
	if err := s.Append("a", entries(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "auditsink", "*"))
	if len(files) < 2 {
		t.Fatalf("the sink's directory holds %v, want its state and backlog", files)
	}
	for _, p := range files {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2 := open(t, dir, u, nil, 0, 5)
	defer s2.Close()
	if got := s2.Backlog(); got != 3 {
		t.Errorf("backlog after reopening = %d, want 3", got)
	}
	for _, p := range files {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s is mode %v after the sink opened it, want 0600", filepath.Base(p), got)
		}
	}
}
