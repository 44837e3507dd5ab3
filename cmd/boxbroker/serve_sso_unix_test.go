//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/intentius/boxbroker/internal/filelock/filelocktest"
)

// TestServe_SSOSecretFileJudgedAsOpened: a FIFO given (or put) as
// --sso-client-secret-file is refused, naming the flag, not waited on
// for a writer (serve hung at start), nor fed a secret by whoever opens
// it for writing; a link to a regular file is followed.
func TestServe_SSOSecretFileJudgedAsOpened(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept")
	if err := os.WriteFile(kept, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(kept, link); err != nil {
		t.Fatal(err)
	}
	if s, err := readSecretFile(link); err != nil || s != "file-secret" {
		t.Errorf("readSecretFile through a link to a file = %v; want its secret", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	err := filelocktest.Fed(t, fifo, "fed-secret\n", func() error {
		_, err := readSecretFile(fifo)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "--sso-client-secret-file") || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("readSecretFile of a FIFO = %v, want a refusal naming the flag and a FIFO", err)
	}
}
