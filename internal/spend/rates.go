package spend

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/ratelimit"
)

// RateLimiter holds model calls to token-rate limits (ratelimit.Limiter): a
// call is admitted before its budget is reserved, and charged its tokens
// as it settles.
type RateLimiter interface {
	// Admit counts a call of the box named box, enrolled at created
	// (its CreatedAt), paid by principal, or refuses it.
	Admit(box string, created time.Time, principal string) *ratelimit.Refusal
	// Charge counts a settled call's tokens.
	Charge(box string, created time.Time, principal string, input, output int64)
}

// admitRate refuses a call of s past a rate limit with a 429 whose
// Retry-After says when to try again; nil admits it (and without a RateLimiter).
func (m *Meter) admitRate(w http.ResponseWriter, s *settlement) error {
	if m.cfg.RateLimiter == nil {
		return nil
	}
	f := m.cfg.RateLimiter.Admit(s.box, s.created, s.principal)
	if f == nil {
		return nil
	}
	w.Header().Set("Retry-After", strconv.FormatInt(retrySeconds(f), 10))
	return RateLimited(f)
}

// retrySeconds is f's RetryAfter in whole seconds, rounded up: what
// Retry-After says and the refusal's message repeats.
func retrySeconds(f *ratelimit.Refusal) int64 {
	return int64(math.Ceil(f.RetryAfter.Seconds()))
}

// RateLimited is the refusal of a call past f's limit; the wait it says
// is Retry-After's.
func RateLimited(f *ratelimit.Refusal) *capability.Error {
	who := "this box"
	if f.Limit.Principal != "" {
		who = f.Limit.Principal + " on this box"
	}
	return capability.Refuse(capability.ReasonTokenRate, "The rate limit of %s is %d %s a minute, and %d were used in the last minute; try again in %ds. "+
		"The owner can change it with `boxbroker limit set`.", who, f.Max, f.Of, f.Used, retrySeconds(f))
}

// chargeRate counts the tokens of the call's answers, readings, against
// s's rate limits: what each answer read whole reported; for one not read
// whole (cut off before its message_delta, whose usage alone says what was
// output, or unreadable), which may have run to its bound, the larger of
// what it reported and the call's output bound (max_tokens), and its input
// bound when it reported no input. A box that goes away before each of its
// streams ends passes no output limit by more than the calls in flight.
func (m *Meter) chargeRate(s *settlement, readings []reading) {
	if m.cfg.RateLimiter == nil {
		return
	}
	var in, out int64
	for _, rd := range readings {
		t := rd.tokens
		i, o := t.Input+t.CacheRead+t.CacheWrite, t.Output
		if !rd.measured || rd.open {
			m.estimateLate(s)
			o = max(o, min(s.est.Output, MaxReportedTokens))
			if i == 0 {
				i = min(s.est.Input, MaxReportedTokens)
			}
		}
		in, out = in+i, out+o
	}
	m.cfg.RateLimiter.Charge(s.box, s.created, s.principal, in, out)
}
