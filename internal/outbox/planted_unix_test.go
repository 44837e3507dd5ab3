//go:build unix

package outbox

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/filelock/filelocktest"
)

// operatorsFile is a file of the operator's outside the data directory,
// mode 0644, for a planted link to lead to.
func operatorsFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "operators-file")
	wide(t, p, "the operator's own\n")
	return p
}

// wantUntouched fails t unless the operator's file at p holds what
// operatorsFile wrote, with its mode.
func wantUntouched(t *testing.T, p, what string) {
	t.Helper()
	if b, _ := os.ReadFile(p); string(b) != "the operator's own\n" {
		t.Errorf("%s: the operator's file holds %q, want it untouched", what, b)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s: the operator's file is mode %v (%v), want its 0644 kept", what, fi.Mode().Perm(), err)
	}
}

// TestFiles_LinkPlantedIsRefused: a link that a user who may write into
// the data directory put at a journal of a replica gone, a journal's
// rewrite (passed over), or the new file WriteFile writes beside its
// file, leading to a file of the operator's, is refused, naming it a
// link, and the file it leads to is left as it was. (A journal was chmodded through it, read
// and its lines set aside as unread; a rewrite's, chmodded; WriteFile's
// truncated, written, chmodded and the link renamed over its file.)
func TestFiles_LinkPlantedIsRefused(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, name := range []string{"journal-gone.jsonl", "journal-gone.compact"} {
		dir := t.TempDir()
		victim := operatorsFile(t)
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir, 0, "", quiet, func(Batch) error { return nil })
		if err == nil {
			j.Close()
		}
		// A rewrite cut off is removed, not read: one that cannot be
		// opened is passed over.
		if name == "journal-gone.jsonl" && (!errors.Is(err, filelock.ErrNotRegular) || !strings.Contains(err.Error(), "a link")) {
			t.Errorf("OpenJournal with %s a link = %v, want a refusal naming it a link", name, err)
		}
		wantUntouched(t, victim, name)
	}

	dir := t.TempDir()
	victim := operatorsFile(t)
	p := filepath.Join(dir, "state.json")
	if err := os.Symlink(victim, p+".new"); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("{}\n")); !errors.Is(err, filelock.ErrNotRegular) {
		t.Errorf("WriteFile with its new file a link = %v, want it refused", err)
	}
	wantUntouched(t, victim, "WriteFile")
	if fi, err := os.Lstat(p); err == nil {
		t.Errorf("WriteFile refused left %s as %v, want nothing there", p, fi.Mode())
	}
}

// TestFiles_FIFOPlantedIsRefused: a FIFO put at a journal of a replica
// gone is refused, naming it, rather than waited on for a writer (the
// journal's opening, and serve's start, hung there).
func TestFiles_FIFOPlantedIsRefused(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal-gone.jsonl")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	err := filelocktest.Fed(t, p, "", func() error {
		j, err := OpenJournal(dir, 0, "", slog.New(slog.DiscardHandler), func(Batch) error { return nil })
		if err == nil {
			j.Close()
		}
		return err
	})
	if !errors.Is(err, filelock.ErrNotRegular) || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("OpenJournal with a journal a FIFO = %v, want a refusal naming it a FIFO", err)
	}
}

// TestFiles_HardLinkPlantedIsRefused: a hard link that a user who may
// write into the data directory made (where fs.protected_hardlinks is 0)
// at a spool file, the dead letters, a gone replica's journal or the new
// file beside a file replaced whole, to a file of the operator's, is
// refused, wrapping filelock.ErrHardLinked, and the file is left as it
// was: not chmodded, truncated nor written through.
func TestFiles_HardLinkPlantedIsRefused(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, name := range []string{SpoolFile, DeadFile, "journal-gone.jsonl", DeadFile + ".new"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			victim := operatorsFile(t)
			if err := os.Link(victim, filepath.Join(dir, name)); err != nil {
				t.Skip("no hard link here:", err)
			}
			var err error
			switch name {
			case "journal-gone.jsonl":
				var j *Journal
				if j, err = OpenJournal(dir, 0, "", quiet, func(Batch) error { return nil }); err == nil {
					j.Close()
				}
			case DeadFile + ".new":
				err = WriteFile(filepath.Join(dir, DeadFile), []byte("{}\n"))
			default:
				var s *Spool
				if s, err = OpenSpool(dir, 0, "", quiet); err == nil {
					s.Close()
				}
			}
			if !errors.Is(err, filelock.ErrHardLinked) {
				t.Errorf("opening with a hard link at %s = %v, want ErrHardLinked", name, err)
			}
			wantUntouched(t, victim, name)
		})
	}
}
