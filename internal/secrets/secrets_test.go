package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSealOpen(t *testing.T) {
	k, created, err := Load(t.TempDir(), "")
	if err != nil || !created {
		t.Fatalf("Load = %v, %v", created, err)
	}
	sealed, err := k.Seal([]byte("sk-ant-api03-secret"), "credential:anthropic")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("secret")) {
		t.Fatal("sealed value holds the plaintext")
	}
	got, err := k.Open(sealed, "credential:anthropic")
	if err != nil || string(got) != "sk-ant-api03-secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := k.Open(sealed, "credential:fountain"); !errors.Is(err, ErrOpen) {
		t.Errorf("Open with other ad = %v, want ErrOpen", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := k.Open(sealed, "credential:anthropic"); !errors.Is(err, ErrOpen) {
		t.Errorf("Open of tampered value = %v, want ErrOpen", err)
	}
}

func TestLoad_KeyFileKeptAndPrivate(t *testing.T) {
	dir := t.TempDir()
	k1, _, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	sealed, _ := k1.Seal([]byte("v"), "x")
	k2, created, err := Load(dir, "")
	if err != nil || created {
		t.Fatalf("second Load = %v, %v", created, err)
	}
	if got, err := k2.Open(sealed, "x"); err != nil || string(got) != "v" {
		t.Errorf("reloaded key Open = %q, %v", got, err)
	}
	os.Chmod(filepath.Join(dir, KeyFile), 0o644)
	if _, _, err := Load(dir, ""); err == nil {
		t.Error("Load of a world-readable key file succeeded")
	}
}

func TestLoad_EnvKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", true},
		{"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", true},
		{"short", false},
	}
	for _, tt := range tests {
		_, _, err := Load(t.TempDir(), tt.key)
		if (err == nil) != tt.ok {
			t.Errorf("Load(env %q) error = %v, want ok %v", tt.key, err, tt.ok)
		}
	}
}

// TestLoad_NewKeyFileIsSynced: a new master key file is synced, and so
// is the directory that names it, before Load returns the key that
// values are sealed with: a power cut after the store took one would
// otherwise leave the file empty or gone, and the value unopenable. A
// sync that fails fails Load.
func TestLoad_NewKeyFileIsSynced(t *testing.T) {
	keepFile, keepDir := syncFile, syncDir
	defer func() { syncFile, syncDir = keepFile, keepDir }()
	dir := t.TempDir()
	var files, dirs []string
	syncFile = func(f *os.File) error { files = append(files, f.Name()); return f.Sync() }
	syncDir = func(d string) error { dirs = append(dirs, d); return nil }
	if _, created, err := Load(dir, ""); err != nil || !created {
		t.Fatalf("Load = %v, %v", created, err)
	}
	if len(files) != 1 || files[0] != filepath.Join(dir, KeyFile) || len(dirs) != 1 || dirs[0] != dir {
		t.Errorf("Load synced files %q and directories %q, want %s and %s", files, dirs, filepath.Join(dir, KeyFile), dir)
	}
	syncDir = func(string) error { return errors.New("input/output error") }
	if _, _, err := Load(t.TempDir(), ""); err == nil {
		t.Error("Load with its directory not synced = nil error, want the error")
	}
}
