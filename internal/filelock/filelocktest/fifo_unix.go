//go:build unix

// Package filelocktest feeds FIFOs planted by tests of code that must
// never wait on one where it opens a file (package filelock).
package filelocktest

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Fed runs f on a goroutine of its own and returns its error. Until f
// returns it opens the FIFO at p for writing without waiting, each
// millisecond (an open that succeeds only while a reader waits on it),
// writes feed and closes it again, so that code which opened the FIFO
// and waits for a writer goes on, and its test fails rather than hangs.
// It fails t when f has neither returned nor opened the FIFO after
// 20,000 tries.
func Fed(t testing.TB, p, feed string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	for range 20000 {
		select {
		case err := <-done:
			return err
		default:
		}
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			if feed != "" {
				_, _ = w.WriteString(feed)
			}
			w.Close()
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("neither returned nor opened the FIFO %s", p)
	return nil
}
