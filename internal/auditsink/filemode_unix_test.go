//go:build unix

package auditsink_test

import (
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/filelock/filelocktest"
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

// TestSink_FilesPlantedAreRefused: a link that a user who may write into
// the data directory put at the sink's state or backlog, leading to a
// file of the operator's, is refused, and that file left as it was (it
// was chmodded 0600 through the link, and the backlog appended to); a
// FIFO at the state is refused, not waited on for a writer (the sink's
// opening, and serve's start, hung there); a state of megabytes is
// refused, not read whole.
func TestSink_FilesPlantedAreRefused(t *testing.T) {
	_, u := newReceiver(t, 0)
	for _, name := range []string{"state.json", "backlog-1.jsonl"} {
		dir := t.TempDir()
		sd := filepath.Join(dir, "auditsink")
		if err := os.Mkdir(sd, 0o700); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(t.TempDir(), "operators-file")
		if err := os.WriteFile(victim, []byte("the operator's own\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(victim, 0o644); err != nil {
			t.Fatal(err)
		}
		if name != "state.json" {
			if err := os.WriteFile(filepath.Join(sd, "state.json"), []byte(`{"replica":"r","gen":1}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(victim, filepath.Join(sd, name)); err != nil {
			t.Fatal(err)
		}
		if err := openErr(dir, u); !errors.Is(err, filelock.ErrNotRegular) {
			t.Errorf("Open with %s a link = %v, want it refused", name, err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "the operator's own\n" {
			t.Errorf("%s: the operator's file holds %q, want it untouched", name, b)
		}
		if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: the operator's file is mode %v (%v), want its 0644 kept", name, fi.Mode().Perm(), err)
		}
	}

	dir := t.TempDir()
	sd := filepath.Join(dir, "auditsink")
	if err := os.Mkdir(sd, 0o700); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(sd, "state.json")
	if err := os.WriteFile(big, []byte(`{"replica":"r","gen":1}`+strings.Repeat(" ", 8<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := openErr(dir, u); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Open with a state of 8 MiB = %v, want it refused as larger than a state", err)
	}

	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(big, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	err := filelocktest.Fed(t, big, "", func() error { return openErr(dir, u) })
	if !errors.Is(err, filelock.ErrNotRegular) || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("Open with the state a FIFO = %v, want a refusal naming it a FIFO", err)
	}
}

// openErr opens a sink on dir and closes it, and returns Open's error.
func openErr(dir string, u *url.URL) error {
	s, err := auditsink.Open(auditsink.Config{URL: u, Dir: dir, Token: "sink-bearer", Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_ = s.Close()
	}
	return err
}
