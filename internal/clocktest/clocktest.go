// Package clocktest provides a clock for tests whose time moves only when
// the test moves it, so that what a test judges does not hang on the
// scheduler. It is for tests only.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a settable clock, safe for concurrent use. Its Now is given
// where a Config or Options takes a clock.
type Clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// New returns a Clock reading t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now is c's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves c's time on by d (back, when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set sets c's time to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
