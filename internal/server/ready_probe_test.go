package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// An unauthenticated flood of /readyz on the box-facing listener must not
// become a flood of synced writes: concurrent checks share one write, a
// write that succeeded stands for diskOKFor, and a failure is not kept.
func TestDiskProbe_AFloodIsOneWrite(t *testing.T) {
	var writes atomic.Int32
	release := make(chan struct{})
	fail := atomic.Bool{}
	p := &diskProbe{write: func(string) error {
		writes.Add(1)
		<-release
		if fail.Load() {
			return errors.New("no space left on device")
		}
		return nil
	}}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.writable(ctx, 10*time.Second, t.TempDir())
		}()
	}
	// Wait until the one write has begun, then let it finish.
	for writes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a check failed: %v", err)
		}
	}
	if n := writes.Load(); n > 2 {
		t.Errorf("100 concurrent checks made %d writes, want 1 (2 at most, if one began after the first ended)", n)
	}
	before := writes.Load()
	for range 100 {
		if err := p.writable(ctx, 10*time.Second, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Load() - before; n != 0 {
		t.Errorf("100 checks just after a write that succeeded made %d more writes, want 0", n)
	}
	// A failure is not kept: once the success has aged, each check
	// writes again.
	p.mu.Lock()
	p.okUntil = time.Time{}
	p.mu.Unlock()
	fail.Store(true)
	for i := range 3 {
		if err := p.writable(ctx, 10*time.Second, ""); err == nil {
			t.Fatalf("check %d on a full disk passed", i)
		}
	}
	if n := writes.Load() - before; n != 3 {
		t.Errorf("3 checks on a failing disk made %d writes, want 3", n)
	}
}
