package broker

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/intentius/boxbroker/internal/capability"
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

// limiter applies Limits per box: a token bucket (golang.org/x/time/rate)
// for the rate, and a count of requests in flight. A box is forgotten
// while it asks nothing: its entry goes once it has nothing in flight and
// a full bucket, the state a new entry starts in, so that the map holds
// only the boxes that are asking or have asked within the time their
// bucket takes to fill (at most sweepEvery later).
type limiter struct {
	lim Limits
	now func() time.Time

	mu    sync.Mutex // guards boxes and swept
	boxes map[string]*boxLimit
	swept time.Time // when sweepLocked last ran
}

// sweepEvery is how often take looks over every box for the idle
// ones to forget, besides the box each release forgets.
const sweepEvery = time.Minute

// boxLimit is one box's bucket and in-flight count, guarded by limiter.mu.
type boxLimit struct {
	bucket   *rate.Limiter // nil when Limits has no Rate
	inFlight int
}

func newLimiter(l Limits, now func() time.Time) *limiter {
	if l.Rate > 0 && l.Burst <= 0 {
		l.Burst = int(math.Max(1, math.Ceil(l.Rate)))
	}
	return &limiter{lim: l, now: now, boxes: map[string]*boxLimit{}, swept: now()}
}

// held is one request a limiter admitted, until release (called once)
// ends it; the zero held holds nothing. A value, not a closure: the
// broker's own requests hold it with no allocation.
type held struct {
	l   *limiter
	box string
	b   *boxLimit
}

// release ends the request h holds. It must be called at most once.
func (h held) release() {
	if h.b != nil {
		h.l.release(h.box, h.b)
	}
}

// take admits one request of box, or returns a 429 refusal saying when
// to try again.
func (l *limiter) take(box string) (held, error) { return l.takeRated(box, true) }

// takeRated is take, counting the request against the box's rate only
// when rated (false: a front door counted it already, with count).
func (l *limiter) takeRated(box string, rated bool) (held, error) {
	if l.lim.Rate <= 0 && l.lim.Concurrent <= 0 {
		return held{}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.swept) >= sweepEvery {
		l.sweepLocked(now)
	}
	b := l.boxes[box]
	if b == nil {
		b = &boxLimit{}
		if l.lim.Rate > 0 {
			b.bucket = rate.NewLimiter(rate.Limit(l.lim.Rate), l.lim.Burst)
		}
		l.boxes[box] = b
	}
	if l.lim.Concurrent > 0 && b.inFlight >= l.lim.Concurrent {
		return held{}, tooMany(1, "This box has %d requests in flight, the most the broker allows one box; wait for one to finish.", l.lim.Concurrent)
	}
	if rated {
		if err := l.allowLocked(b, now); err != nil {
			return held{}, err
		}
	}
	b.inFlight++
	return held{l: l, box: box, b: b}, nil
}

// count counts one request of box against its rate alone, holding
// nothing, or returns the 429 refusal past it.
func (l *limiter) count(box string) error {
	if l.lim.Rate <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.boxes[box]
	if b == nil {
		b = &boxLimit{bucket: rate.NewLimiter(rate.Limit(l.lim.Rate), l.lim.Burst)}
		l.boxes[box] = b
	}
	return l.allowLocked(b, now)
}

// allowLocked takes one token of b's bucket at now, or returns the 429
// refusal saying when to try again.
func (l *limiter) allowLocked(b *boxLimit, now time.Time) error {
	if b.bucket != nil && !b.bucket.AllowN(now, 1) {
		wait := math.Ceil((1 - b.bucket.TokensAt(now)) / l.lim.Rate)
		return tooMany(int(wait), "This box is over the broker's rate of %g requests a second.", l.lim.Rate)
	}
	return nil
}

// release ends one request of box, whose entry is b, and forgets the box
// when it is idle.
func (l *limiter) release(box string, b *boxLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b.inFlight--
	if l.idleLocked(b, l.now()) && l.boxes[box] == b {
		delete(l.boxes, box)
	}
}

// idleLocked reports whether b is as a new entry would be: nothing in
// flight, and its bucket full.
func (l *limiter) idleLocked(b *boxLimit, now time.Time) bool {
	return b.inFlight == 0 && (b.bucket == nil || b.bucket.TokensAt(now) >= float64(l.lim.Burst))
}

// sweepLocked forgets every idle box.
func (l *limiter) sweepLocked(now time.Time) {
	l.swept = now
	for box, b := range l.boxes {
		if l.idleLocked(b, now) {
			delete(l.boxes, box)
		}
	}
}

// tooMany is the 429 refusal of a box past its limits, whose Retry-After
// says to try again in seconds (at least 1).
func tooMany(seconds int, format string, args ...any) error {
	e := capability.Refuse(capability.ReasonLimit, format, args...)
	e.Header = http.Header{"Retry-After": {strconv.Itoa(max(seconds, 1))}}
	return e
}
