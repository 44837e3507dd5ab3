package deadline

import (
	"log/slog"
	"sync"
	"time"
)

// NewOn is New on the fake clock c, for the tests of the deadline.
func NewOn(d time.Duration, log *slog.Logger, c *FakeClock) *Bound { return newOn(d, log, c) }

// FakeClock is a clock whose time moves only by Advance: a Bound on it
// gives up on a call exactly when the test has moved its time past the
// call's deadline, however the scheduler runs the test's goroutines.
type FakeClock struct {
	mu     sync.Mutex // guards now and timers
	now    time.Time
	timers map[*fakeTimer]time.Time // the armed timers and when each is due
}

// NewFakeClock is a FakeClock at an arbitrary time.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.Unix(1_800_000_000, 0), timers: map[*fakeTimer]time.Time{}}
}

// Now is c's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves c's time on by d and fires the timers then due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t, due := range c.timers {
		if !due.After(c.now) {
			delete(c.timers, t)
			select {
			case t.c <- c.now:
			default:
			}
		}
	}
}

// Armed is how many of c's timers wait to fire.
func (c *FakeClock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NewTimer is a timer firing d after c's time.
func (c *FakeClock) NewTimer(d time.Duration) timer {
	t := &fakeTimer{c: make(chan time.Time, 1), clock: c}
	t.Reset(d)
	return t
}

// fakeTimer is a FakeClock's timer. Like a *time.Timer, once Reset or
// Stop returns, no value from before is received from it.
type fakeTimer struct {
	c     chan time.Time
	clock *FakeClock
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	_, armed := c.timers[t]
	t.drain()
	if d <= 0 {
		delete(c.timers, t)
		t.c <- c.now
		return armed
	}
	c.timers[t] = c.now.Add(d)
	return armed
}

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	_, armed := c.timers[t]
	delete(c.timers, t)
	t.drain()
	return armed
}

func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}
