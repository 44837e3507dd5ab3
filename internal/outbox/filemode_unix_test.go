//go:build unix

package outbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// wide writes data as the file at p with mode 0644, whatever the umask:
// a file an older boxbroker, a restored backup or a copy made by hand
// left readable by every user of the machine.
func wide(t *testing.T, p string, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantOwnerOnly fails t unless the file at p is mode 0600.
func wantOwnerOnly(t *testing.T, p, when string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if got := fi.Mode().Perm(); got != FileMode {
		t.Errorf("%s: %s is mode %v, want %v", when, filepath.Base(p), got, FileMode)
	}
}

// TestFiles_WiderFilesAreNarrowedAtOpen: the spool, the file set aside
// for replay, the dead letters, the lines set aside unread, the replay
// lock and a journal left by a replica that is gone, found readable by
// others (0644), are made 0600 when the spool and the journal are opened
// (a journal whose recovery fails is left, narrowed); and so is a file
// WriteFile or OpenLog finds wider.
func TestFiles_WiderFilesAreNarrowedAtOpen(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0, nil)
	if _, err := j.Audit(store.AuditEntry{Route: "/r", Box: "alpha"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	journal := j.Path()
	if err := os.Chmod(journal, 0o644); err != nil {
		t.Fatal(err)
	}
	names := []string{SpoolFile, SpoolReplayFile, DeadFile, UnreadFile, SpoolReplayLock}
	for _, name := range names {
		wide(t, filepath.Join(dir, name), "")
	}
	openSpool(t, dir)
	for _, name := range names {
		wantOwnerOnly(t, filepath.Join(dir, name), "after OpenSpool")
	}
	if _, err := OpenJournal(dir, 0, "", quiet, func(Batch) error { return errors.New("the store refuses") }); err == nil {
		t.Fatal("OpenJournal whose recovery fails = nil error")
	}
	wantOwnerOnly(t, journal, "after a recovery that failed")

	p := filepath.Join(dir, "state.json")
	wide(t, p+".new", "left by a crash")
	if err := WriteFile(p, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	wantOwnerOnly(t, p, "after WriteFile over a wider .new")

	p = filepath.Join(dir, "backlog-1.jsonl")
	wide(t, p, "")
	f, err := OpenLog(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	wantOwnerOnly(t, p, "after OpenLog")
}
