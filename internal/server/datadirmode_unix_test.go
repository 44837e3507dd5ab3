//go:build unix

package server_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
)

// TestServe_WiderFilesInTheDataDirectory: files of the data directory
// found readable by others (0644, as an older boxbroker, a restored
// backup or a copy made by hand leaves them) are made 0600 when serve
// opens them — serve.lock, the spool and the files beside it, the
// database — and a master.key others may read (0644, or its group 0640)
// is refused, naming the file and the fix, and left as it is: narrowing
// it would hide that the key that seals every credential may have been
// read.
func TestServe_WiderFilesInTheDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := server.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "off"}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	srv, err := server.New(t.Context(), cfg, server.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	narrowed := []string{server.LockFile, server.DBFile, outbox.SpoolFile, outbox.DeadFile, outbox.UnreadFile}
	for _, name := range narrowed {
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err = server.New(t.Context(), cfg, server.Options{Logger: log})
	if err != nil {
		t.Fatalf("New over files of mode 0644: %v", err)
	}
	for _, name := range narrowed {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s is mode %v while serve runs, want 0600", name, got)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	key := filepath.Join(dir, secrets.KeyFile)
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(t.Context(), cfg, server.Options{Logger: log})
		if err == nil {
			srv.Close()
			t.Fatalf("New with master.key of mode %v = nil error, want it refused", mode)
		}
		if msg := err.Error(); !strings.Contains(msg, key) || !strings.Contains(msg, "chmod 600") {
			t.Errorf("New with master.key of mode %v = %q, want the file and the fix named", mode, msg)
		}
		if _, err := server.LoadKeyring(&cfg); err == nil {
			t.Errorf("LoadKeyring with master.key of mode %v = nil error, want it refused", mode)
		}
		if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("master.key after the refusal: %v, %v; want it left at %v", fi.Mode().Perm(), err, mode)
		}
	}
}
