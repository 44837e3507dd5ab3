package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// gone is a store in which every box has been removed.
type gone struct{ store.Store }

func (gone) BoxByTokenHash(context.Context, string) (store.Box, error) {
	return store.Box{}, store.ErrNotFound
}

// TestCached_ReadsTheMapsAfterAReset: a read that starts while a reset
// (Run's first poll, or a poll after a gap in the change log) holds the
// lock answers from the maps the reset made, not from those it threw
// away. The maps were passed by value, read before the lock, so such a
// read could admit a token whose box was removed while the change log
// was out of reach (and the race detector saw the field read).
func TestCached_ReadsTheMapsAfterAReset(t *testing.T) {
	now := time.Now()
	c := &Cache{st: gone{}, opt: Options{MaxStale: time.Minute, Now: func() time.Time { return now }}}
	c.resetLocked()
	c.polledAt = now
	c.boxes["h"] = store.Box{Name: "removed"}

	c.mu.Lock()
	got := make(chan error, 1)
	go func() {
		_, err := c.BoxByTokenHash(context.Background(), "h")
		got <- err
	}()
	// Give the read time to reach the lock; with the maps taken under it,
	// how long it waits does not change its answer.
	time.Sleep(50 * time.Millisecond)
	c.resetLocked()
	c.mu.Unlock()

	if err := <-got; !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a read begun during a reset got %v, want store.ErrNotFound (the box was removed)", err)
	}
}
