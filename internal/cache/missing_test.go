package cache

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// counting is a store in which no token is a box's, counting its reads.
type counting struct {
	store.Store
	reads atomic.Int64
}

func (c *counting) BoxByTokenHash(context.Context, string) (store.Box, error) {
	c.reads.Add(1)
	return store.Box{}, store.ErrNotFound
}

// TestCached_RandomMissesDoNotCrowdOutARecurringOne: a client sending
// tokens at random fills the cache of unknown tokens; a token that
// recurs after that (a box left with a removed token, asking again) is
// still kept once read, so it costs one store read, not one a request.
// Once full, the cache used to keep no new miss at all.
func TestCached_RandomMissesDoNotCrowdOutARecurringOne(t *testing.T) {
	now := time.Now()
	st := &counting{}
	c := &Cache{st: st, opt: Options{MaxStale: time.Hour, Now: func() time.Time { return now }}}
	c.resetLocked()
	c.polledAt = now
	ctx := context.Background()
	for i := range maxMissing + 100 {
		if _, err := c.BoxByTokenHash(ctx, "random-"+strconv.Itoa(i)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an unknown token's read = %v, want store.ErrNotFound", err)
		}
	}
	if n := len(c.missing); n > maxMissing {
		t.Fatalf("%d misses kept, want at most %d", n, maxMissing)
	}
	before := st.reads.Load()
	for range 50 {
		if _, err := c.BoxByTokenHash(ctx, "recurring"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the recurring token's read = %v, want store.ErrNotFound", err)
		}
	}
	if n := st.reads.Load() - before; n != 1 {
		t.Errorf("store reads for one recurring unknown token = %d, want 1", n)
	}
}
