//go:build unix

package server_test

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/filelock/filelocktest"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/server"
)

// plantedNames are the files of a data directory serve opens at start,
// at which a user who may write into it (its group: a directory of mode
// 0770 is taken) may put a link or a FIFO beforehand.
var plantedNames = []string{
	server.LockFile, server.DBFile, server.DBFile + "-wal", server.DBFile + "-shm",
	outbox.SpoolFile, outbox.SpoolReplayFile, outbox.DeadFile, outbox.UnreadFile, outbox.SpoolReplayLock,
}

// TestServe_LinkPlantedInTheDataDirectory: a link put at one of the
// files serve opens in a data directory its group may write, leading to
// a file of the operator's (mode 0644), is refused, naming it: the file
// it leads to is not truncated, written or narrowed to 0600 (serve.lock
// was truncated and given serve's process ID; the spool's files and the
// database's WAL were chmodded through the link).
func TestServe_LinkPlantedInTheDataDirectory(t *testing.T) {
	for _, name := range plantedNames {
		t.Run(name, func(t *testing.T) {
			dir := groupDataDir(t, name)
			victim := operatorsFile(t)
			p := filepath.Join(dir, name)
			if err := os.Symlink(victim, p); err != nil {
				t.Fatal(err)
			}
			err := newServer(t, dir)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "a link") {
				t.Errorf("New with %s a link = %v, want a refusal naming it a link", name, err)
			}
			keptUntouched(t, name, victim)
		})
	}
}

// TestServe_HardLinkPlantedInTheDataDirectory: a hard link made at one
// of the files serve opens in a data directory its group may write (where
// fs.protected_hardlinks is 0), to a file of the operator's (mode 0644),
// is refused, naming it: the file is not truncated, written or narrowed
// to 0600 through it.
func TestServe_HardLinkPlantedInTheDataDirectory(t *testing.T) {
	for _, name := range plantedNames {
		t.Run(name, func(t *testing.T) {
			dir := groupDataDir(t, name)
			victim := operatorsFile(t)
			p := filepath.Join(dir, name)
			if err := os.Link(victim, p); err != nil {
				t.Skip("no hard link here:", err)
			}
			err := newServer(t, dir)
			if !errors.Is(err, filelock.ErrHardLinked) || !strings.Contains(err.Error(), p) {
				t.Errorf("New with %s a hard link = %v, want a refusal naming it (ErrHardLinked)", name, err)
			}
			keptUntouched(t, name, victim)
		})
	}
}

// TestServe_FIFOPlantedInTheDataDirectory: a FIFO put at one of the
// files serve opens in a data directory its group may write is refused,
// naming it, rather than waited on for a writer (serve hung at start) or
// locked and written as serve.lock.
func TestServe_FIFOPlantedInTheDataDirectory(t *testing.T) {
	for _, name := range plantedNames {
		t.Run(name, func(t *testing.T) {
			dir := groupDataDir(t, name)
			p := filepath.Join(dir, name)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skip("no FIFO here:", err)
			}
			err := filelocktest.Fed(t, p, "", func() error { return newServer(t, dir) })
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "a FIFO") {
				t.Errorf("New with %s a FIFO = %v, want a refusal naming it a FIFO", name, err)
			}
		})
	}
}

// groupDataDir is a data directory of mode 0770, which serve takes,
// served once (its database made) and without name, so that a file can
// be put there in its place.
func groupDataDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := newServer(t, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return dir
}

// newServer runs server.New on dir, closing what it returns, and returns
// its error.
func newServer(t *testing.T, dir string) error {
	srv, err := server.New(t.Context(), server.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "off"},
		server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err == nil {
		_ = srv.Close()
	}
	return err
}

// operatorsFile is a file of the operator's, mode 0644, outside the data
// directory, for a planted link to point at.
func operatorsFile(t *testing.T) string {
	t.Helper()
	victim := filepath.Join(t.TempDir(), "operators-file")
	if err := os.WriteFile(victim, []byte("the operator's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return victim
}

// keptUntouched fails t unless victim (operatorsFile's) holds what it held
// and keeps its mode, though name in the data directory linked to it.
func keptUntouched(t *testing.T, name, victim string) {
	t.Helper()
	if b, _ := os.ReadFile(victim); string(b) != "the operator's own\n" {
		t.Errorf("the file %s links to holds %q, want it untouched", name, b)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file %s links to is mode %v (%v), want its 0644 kept", name, fi.Mode().Perm(), err)
	}
}
