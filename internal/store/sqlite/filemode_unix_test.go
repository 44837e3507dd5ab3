//go:build unix

package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// TestSQLite_FilesAre0600InAnOpenDirectory opens a store in a directory
// others can read, under the usual umask, and finds the database and its
// WAL and shared-memory files readable by the owner alone; a database
// left mode 0644 by an older boxbroker is narrowed when it is opened.
func TestSQLite_FilesAre0600InAnOpenDirectory(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "boxbroker.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("%s: %s is mode %v, want 0600", when, filepath.Base(p), got)
			}
		}
	}
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// A write, so that the WAL and shared-memory files exist.
	if err := st.AddAudit(context.Background(), []store.AuditEntry{{At: time.Now(), Method: "GET", Route: "/r", Capability: "none", Status: 200}}); err != nil {
		t.Fatal(err)
	}
	check("a new store")
	st.Close()

	// A database an older boxbroker left readable by others.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	st, err = sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.AddAudit(context.Background(), []store.AuditEntry{{At: time.Now(), Method: "GET", Route: "/r", Capability: "none", Status: 200}}); err != nil {
		t.Fatal(err)
	}
	check("a store opened again")
}
