package broker

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Limits bound what one box may ask at once, so that one box cannot starve
// the others. A zero field means no bound.
type Limits struct {
	// Rate is the sustained requests per second a box may make.
	Rate float64
	// Burst is how many requests above Rate a box may make at once
	// (default: Rate, at least 1).
	Burst int
	// Concurrent is how many requests a box may have in flight, open
	// streams included.
	Concurrent int
}

// limiter applies Limits per box.
type limiter struct {
	lim Limits
	now func() time.Time

	mu    sync.Mutex // guards boxes
	boxes map[string]*boxLimit
}

// boxLimit is one box's bucket and in-flight count, guarded by limiter.mu.
type boxLimit struct {
	tokens   float64
	last     time.Time
	inFlight int
}

func newLimiter(l Limits, now func() time.Time) *limiter {
	if l.Rate > 0 && l.Burst <= 0 {
		l.Burst = int(math.Max(1, math.Ceil(l.Rate)))
	}
	return &limiter{lim: l, now: now, boxes: map[string]*boxLimit{}}
}

// acquire admits one request of box, returning the function that ends it,
// or a 429 refusal saying when to try again.
func (l *limiter) acquire(box string) (release func(), err error) {
	if l.lim.Rate <= 0 && l.lim.Concurrent <= 0 {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.boxes[box]
	now := l.now()
	if b == nil {
		b = &boxLimit{tokens: float64(l.lim.Burst), last: now}
		l.boxes[box] = b
	}
	if l.lim.Concurrent > 0 && b.inFlight >= l.lim.Concurrent {
		return nil, tooMany(1, "This box has %d requests in flight, the most the broker allows one box; wait for one to finish.", l.lim.Concurrent)
	}
	if l.lim.Rate > 0 {
		b.tokens = math.Min(float64(l.lim.Burst), b.tokens+now.Sub(b.last).Seconds()*l.lim.Rate)
		b.last = now
		if b.tokens < 1 {
			wait := math.Ceil((1 - b.tokens) / l.lim.Rate)
			return nil, tooMany(int(wait), "This box is over the broker's rate of %g requests a second.", l.lim.Rate)
		}
		b.tokens--
	}
	b.inFlight++
	return func() {
		l.mu.Lock()
		b.inFlight--
		l.mu.Unlock()
	}, nil
}

// retryAfterError is a 429 refusal with its Retry-After.
type retryAfterError struct {
	err     *capability.Error
	seconds int
}

func (e *retryAfterError) Error() string { return e.err.Error() }

func (e *retryAfterError) Unwrap() error { return e.err }

func tooMany(seconds int, format string, args ...any) error {
	if seconds < 1 {
		seconds = 1
	}
	return &retryAfterError{err: capability.Errorf(http.StatusTooManyRequests, protocol.TypeRateLimit, format, args...), seconds: seconds}
}

func (e *retryAfterError) retryAfter() string { return strconv.Itoa(e.seconds) }
