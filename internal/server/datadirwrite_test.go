package server_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/intentius/boxbroker/internal/server"
)

// TestServe_DataDirectoryOthersCanWriteIsRefused: another local user who
// can write into the data directory (one made world-writable, as a
// shared mount or a directory under /tmp) plants serve.lock as a link to
// a file of the operator's, for serve to truncate and write its process
// ID into, or a master.key of their own for the master key: serve, and a
// command that opens the store or the key there, refuses the directory
// before it opens anything in it, and the file linked to is untouched.
func TestServe_DataDirectoryOthersCanWriteIsRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o703, 0o1777} {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(t.TempDir(), "operators-file")
		if err := os.WriteFile(victim, []byte("the operator's own\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(dir, server.LockFile)); err != nil {
			t.Fatal(err)
		}
		cfg := server.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "off"}
		srv, err := server.New(t.Context(), cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err == nil {
			_ = srv.Close()
		}
		if !errors.Is(err, server.ErrDataDirOpen) {
			t.Errorf("New on a data directory of mode %#o = %v, want ErrDataDirOpen", mode, err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "the operator's own\n" {
			t.Errorf("data directory of mode %#o: the file serve.lock links to holds %q, want it untouched", mode, b)
		}
		if _, err := server.LoadKeyring(&cfg); !errors.Is(err, server.ErrDataDirOpen) {
			t.Errorf("LoadKeyring on a data directory of mode %#o = %v, want ErrDataDirOpen", mode, err)
		}
		if st, err := server.OpenStore(t.Context(), &cfg); !errors.Is(err, server.ErrDataDirOpen) {
			if err == nil {
				_ = st.Close()
			}
			t.Errorf("OpenStore on a data directory of mode %#o = %v, want ErrDataDirOpen", mode, err)
		}
		if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 1 {
			t.Errorf("data directory of mode %#o holds %v after the refusals, want only the planted serve.lock", mode, names)
		}
	}
	// A directory of another user's, mode 0700, is that user's to fill:
	// refused to a process running as root (others cannot enter it).
	if os.Geteuid() == 0 {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 54321, 54321); err != nil {
			t.Fatal(err)
		}
		cfg := server.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "off"}
		srv, err := server.New(t.Context(), cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err == nil {
			_ = srv.Close()
		}
		if !errors.Is(err, server.ErrDataDirOpen) {
			t.Errorf("New as root on a data directory of user 54321 = %v, want ErrDataDirOpen", err)
		}
	}
	// Readable by the group and others, but written by its owner alone,
	// it serves (with a warning: TestServe_WarnsOfAnOpenDataDirectory).
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(t.Context(), server.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "off"},
		server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("New on a data directory of mode 0755: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
}
