// Package hold keeps what a fetch of a credential gave, a value or the
// failure to get one, for a while, so that a storm of calls does not
// become a storm of requests to whoever gives it (a token endpoint, AWS
// STS): a fresh value is held for a floor of reuse at least, whatever
// expiry it came with; a failure until a time its keeper names, a few
// seconds; and a value its user says no longer works is dropped at most
// once each floor. Concurrent fetches of one key are made once (Shared).
// The cloud client's access tokens and role sessions and the mints of
// egress secrets are held here.
package hold

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultFloor is Cache.Floor when it is zero.
const DefaultFloor = 5 * time.Second

// MaxKeys bounds the keys a Cache holds: past it, the Cache starts anew.
const MaxKeys = 4096

// Cache holds, by key, one value or failure each, until a time. The zero
// Cache holds nothing and is ready to use; its methods are safe for
// concurrent use.
type Cache[K comparable, V any] struct {
	// Floor is how long a value is held at least (Until), and how often,
	// at most, Drop drops one key's value; zero means DefaultFloor. Set
	// it before first use.
	Floor time.Duration

	mu      sync.Mutex // guards held and dropped
	held    map[K]entry[V]
	dropped map[K]time.Time // when Drop last dropped each key's value
}

type entry[V any] struct {
	v     V
	err   error
	until time.Time
}

func (c *Cache[K, V]) floor() time.Duration {
	if c.Floor <= 0 {
		return DefaultFloor
	}
	return c.Floor
}

// Get returns what key holds at now: its value, or its failure as err
// (with the value Put gave with it); ok is false when it holds neither.
func (c *Cache[K, V]) Get(key K, now time.Time) (v V, err error, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[key]
	if !ok || !now.Before(e.until) {
		return v, nil, false
	}
	return e.v, e.err, true
}

// Until is how long a value had at now that expires at expiry is held:
// until expiry, and Floor after now at least (a zero expiry, or one
// already past, is Floor after now).
func (c *Cache[K, V]) Until(now, expiry time.Time) time.Time {
	if until := now.Add(c.floor()); until.After(expiry) {
		return until
	}
	return expiry
}

// Put holds v, or the failure err when it is not nil, for key until
// until: a value's until is Until's, a failure's a few seconds.
func (c *Cache[K, V]) Put(key K, v V, err error, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil || len(c.held) >= MaxKeys {
		c.held = make(map[K]entry[V])
	}
	c.held[key] = entry[V]{v: v, err: err, until: until}
}

// Drop drops key's value, held or past, when match reports it is the
// one to drop (the one a call found no longer works), so that the next
// Get finds none; but not within Floor after it last dropped one, by
// now, nor a failure. It reports whether it dropped it. match is called
// with the Cache's lock held.
func (c *Cache[K, V]) Drop(key K, now time.Time, match func(V) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[key]
	if !ok || e.err != nil {
		return false
	}
	if at, ok := c.dropped[key]; ok && now.Sub(at) < c.floor() && !now.Before(at) {
		return false
	}
	if !match(e.v) {
		return false
	}
	delete(c.held, key)
	if c.dropped == nil || len(c.dropped) >= MaxKeys {
		c.dropped = make(map[K]time.Time)
	}
	c.dropped[key] = now
	return true
}

// Shared runs f once for every caller that asks g for key while it runs
// (the first caller's f, which goes on when that caller leaves), and
// returns its result, or ctx's error when ctx ends first.
func Shared[T any](ctx context.Context, g *singleflight.Group, key string, f func() (T, error)) (T, error) {
	ch := g.DoChan(key, func() (any, error) { return f() })
	select {
	case r := <-ch:
		v, _ := r.Val.(T)
		return v, r.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
