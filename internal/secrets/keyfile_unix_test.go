//go:build unix

package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testKey is a master key file's text.
var testKey = strings.Repeat("ab", 32) + "\n"

// TestLoad_KeyFileIsJudgedAsOpened: the master key file is judged by the
// file Load opened, not by its name afterwards. A FIFO in its place is
// refused, not waited on for a writer to feed it a key; so is a FIFO
// others may read, fed a key while a private file is renamed over its
// name (judged by the name after reading, it passed as the private
// file); a link to a device; and a file far larger than a key, even one
// holding a key and blanks, which is not read whole. A link to no file
// is refused once (it was made and read again without end, till the
// stack overflowed); a link to a private key file is followed, and its
// file judged.
func TestLoad_KeyFileIsJudgedAsOpened(t *testing.T) {
	t.Run("a FIFO", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, KeyFile)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skip("no FIFO here:", err)
		}
		wantRefused(t, loadFed(t, dir, p, nil), "not a regular file")
	})
	t.Run("a FIFO others may read, a private file renamed over it as it is read", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, KeyFile)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skip("no FIFO here:", err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, loadFed(t, dir, p, func() {
			private := filepath.Join(dir, "private")
			if err := os.WriteFile(private, []byte(testKey), 0o600); err != nil {
				t.Error(err)
			}
			if err := os.Rename(private, p); err != nil {
				t.Error(err)
			}
		}), "not a regular file")
	})
	t.Run("a link to a device", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(os.DevNull, filepath.Join(dir, KeyFile)); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(dir, "")
		wantRefused(t, err, "not a regular file")
	})
	t.Run("a file far larger than a key", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte(testKey+strings.Repeat("\n", 64<<10)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(dir, "")
		wantRefused(t, err, "larger than")
	})
	t.Run("a link to no file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(dir, "nothing"), filepath.Join(dir, KeyFile)); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(dir, "")
		wantRefused(t, err, "a link to no file")
	})
	t.Run("a link to a private key file", func(t *testing.T) {
		dir := t.TempDir()
		kept := filepath.Join(t.TempDir(), "kept.key")
		if err := os.WriteFile(kept, []byte(testKey), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(kept, filepath.Join(dir, KeyFile)); err != nil {
			t.Fatal(err)
		}
		if _, created, err := Load(dir, ""); err != nil || created {
			t.Errorf("Load through a link to a private key file = %v, %v; want its key", created, err)
		}
	})
}

// loadFed runs Load on dir, whose key file p is a FIFO, and feeds the
// FIFO a key when Load has it open for reading (a writer's open without
// waiting succeeds only then), calling during (when not nil) before the
// writer closes it; it returns Load's error.
func loadFed(t *testing.T, dir, p string, during func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := Load(dir, "")
		done <- err
	}()
	for range 10000 {
		select {
		case err := <-done:
			return err
		default:
		}
		w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil { // no reader yet
			time.Sleep(time.Millisecond)
			continue
		}
		_, _ = w.WriteString(testKey)
		if during != nil {
			during()
		}
		w.Close()
		return <-done
	}
	t.Fatal("Load neither returned nor opened the FIFO")
	return nil
}

// wantRefused fails t unless err is a refusal naming words.
func wantRefused(t *testing.T, err error, words string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), words) {
		t.Errorf("Load = %v, want a refusal naming %q", err, words)
	}
}

// TestLoad_KeyFileOfAnotherUserIsRefused: a master key file, mode 0600,
// that belongs to a user other than the process's own and root is
// refused, naming the file and its owner, as ssh refuses such a key:
// its owner knows the key (one a user who may write into the data
// directory put there before the first start, for credentials to be
// sealed with) and can change it. A process of root's reads such a file
// (as no other process may), which is where the rule bites.
func TestLoad_KeyFileOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, KeyFile)
	if err := os.WriteFile(p, []byte(testKey), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 54321, 54321); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(dir, "")
	wantRefused(t, err, "belongs to user 54321")
	if err := os.Chown(p, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(dir, ""); err != nil {
		t.Errorf("Load of a key file of root's = %v, want its key", err)
	}
}
