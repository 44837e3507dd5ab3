package broker

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
)

// clock is a settable clock for the limiter.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// acquire admits one request of box through take, as the broker does,
// returning the function that ends it, or a 429 refusal saying when to
// try again. The release may be called more than once: only the first
// call ends the request.
func (l *limiter) acquire(box string) (release func(), err error) {
	h, err := l.take(box)
	if err != nil {
		return nil, err
	}
	if h.b == nil {
		return noRelease, nil
	}
	var once sync.Once
	return func() { once.Do(h.release) }, nil
}

func noRelease() {}

// boxesHeld is how many boxes l keeps an entry for.
func boxesHeld(l *limiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.boxes)
}

// TestLimiter_ReleaseTwiceFreesOneSlot: a request's release called twice
// (a deferred release and an explicit one, say) ends one request, not two,
// so that the box cannot go past its concurrency bound afterwards.
func TestLimiter_ReleaseTwiceFreesOneSlot(t *testing.T) {
	l := newLimiter(Limits{Concurrent: 2}, newClock().now)
	first, err := l.acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire("a"); err != nil {
		t.Fatal(err)
	}
	first()
	first()
	if _, err := l.acquire("a"); err != nil {
		t.Fatalf("acquire after one release = %v, want a free slot", err)
	}
	if _, err := l.acquire("a"); err == nil {
		t.Fatal("acquire with 2 in flight of 2 = nil, want a 429: the second release freed a second slot")
	}
}

// TestLimiter_IdleBoxesAreForgotten: a box with nothing in flight and a
// full bucket is not kept, so that the limiter's map does not grow with
// every box that ever asked.
func TestLimiter_IdleBoxesAreForgotten(t *testing.T) {
	t.Run("concurrency only", func(t *testing.T) {
		l := newLimiter(Limits{Concurrent: 4}, newClock().now)
		for i := range 100 {
			release, err := l.acquire(fmt.Sprintf("box-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			release()
		}
		if n := boxesHeld(l); n != 0 {
			t.Errorf("boxes held after every request ended = %d, want 0", n)
		}
	})
	t.Run("rate", func(t *testing.T) {
		c := newClock()
		l := newLimiter(Limits{Rate: 10, Burst: 10, Concurrent: 4}, c.now)
		for i := range 100 {
			release, err := l.acquire(fmt.Sprintf("box-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			release()
		}
		if n := boxesHeld(l); n != 100 {
			t.Fatalf("boxes held at once = %d, want 100 (their buckets are not full yet)", n)
		}
		held, err := l.acquire("box-0")
		if err != nil {
			t.Fatal(err)
		}
		c.t = c.t.Add(sweepEvery)
		if _, err := l.acquire("late"); err != nil {
			t.Fatal(err)
		}
		// Left: box-0, which has a request in flight, and late.
		if n := boxesHeld(l); n != 2 {
			t.Errorf("boxes held after a sweep = %d, want 2", n)
		}
		held()
		c.t = c.t.Add(time.Second) // box-0's bucket is full again
		if _, err := l.acquire("later"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.acquire("box-0"); err != nil {
			t.Errorf("a forgotten box = %v, want it served as a new one", err)
		}
	})
}

// TestLimiter_RateRefusalSaysWhenToRetry: past its rate a box is refused
// with a 429 whose Retry-After is when a request is allowed again.
func TestLimiter_RateRefusalSaysWhenToRetry(t *testing.T) {
	tests := []struct {
		rate  float64
		burst int
		want  string
	}{
		{rate: 1, burst: 1, want: "1"},
		{rate: 0.25, burst: 1, want: "4"},
		{rate: 5, burst: 5, want: "1"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.rate), func(t *testing.T) {
			c := newClock()
			l := newLimiter(Limits{Rate: tt.rate, Burst: tt.burst}, c.now)
			for range tt.burst {
				if _, err := l.acquire("a"); err != nil {
					t.Fatal(err)
				}
			}
			_, err := l.acquire("a")
			var ce *capability.Error
			if !errors.As(err, &ce) || ce.Status != http.StatusTooManyRequests || ce.Reason != "limit" {
				t.Fatalf("acquire past the burst = %v, want a 429 with reason limit", err)
			}
			if ce.Header.Get("Retry-After") == "" {
				t.Fatalf("acquire past the burst = %v, want a refusal with a Retry-After", err)
			}
			if got := ce.Header.Get("Retry-After"); got != tt.want {
				t.Errorf("Retry-After = %q, want %q", got, tt.want)
			}
			c.t = c.t.Add(time.Duration(float64(time.Second) / tt.rate))
			if _, err := l.acquire("a"); err != nil {
				t.Errorf("acquire once the wait is over = %v, want nil", err)
			}
		})
	}
}
