//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
	done := make(chan error, 1)
	go func() {
		_, err := readSecretFile(fifo)
		done <- err
	}()
	for i := 0; ; i++ {
		if i == 20000 {
			t.Fatal("readSecretFile neither returned nor opened the FIFO")
		}
		var err error
		select {
		case err = <-done:
		default:
			// A writer's open without waiting succeeds only when a reader
			// waits: fed a secret, it lets that reader go on.
			if w, werr := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); werr == nil {
				_, _ = w.WriteString("fed-secret\n")
				w.Close()
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "--sso-client-secret-file") || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("readSecretFile of a FIFO = %v, want a refusal naming the flag and a FIFO", err)
		}
		break
	}
}
