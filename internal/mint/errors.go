package mint

// The errors a mint ends in, and how a token endpoint's answer that
// gave no token is read as one.

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
)

// RefusedError is a token endpoint's refusal (a 4xx answer, or an
// OAuth error answer sent with a 2xx): the owner's grant, key or
// installation needs renewing. It holds no value.
type RefusedError struct {
	Kind string
	// Status is the answer's, or 400 for an OAuth error answer sent with
	// a 2xx (RFC 6749 §5.2 gives it 400).
	Status int
	// Code is the OAuth error code (invalid_grant, ...), when one was given.
	Code string
}

// plainCodeRE is an OAuth error code that is the short word RFC 6749
// §5.2 makes it (invalid_grant, ...): anything else the endpoint sent is
// left out of the message, which is stored and shown to the owner, in
// case the endpoint echoed a value into it.
var plainCodeRE = regexp.MustCompile(`^[a-z_]{1,40}$`)

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("%s: the token endpoint refused (%d", e.Kind, e.Status)
	if plainCodeRE.MatchString(e.Code) {
		s += " " + e.Code
	}
	return s + ")"
}

// UnreachableError is a mint that failed for any other reason: the
// endpoint could not be reached, failed (5xx), or answered no token.
type UnreachableError struct {
	Kind string
	Err  error
}

func (e *UnreachableError) Error() string { return e.Kind + ": mint failed: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// RateLimitedError is a token endpoint that limits the rate of mints: a
// 429, a 503 with Retry-After, or GitHub's 403 that says its rate limit
// is spent. It is no refusal of the owner's grant: the broker asks again
// at Until, and not before. It holds no value.
type RateLimitedError struct {
	Kind   string
	Status int
	// Until is when the endpoint may be asked again: its Retry-After (or
	// GitHub's X-Ratelimit-Reset), bounded to between a second and an
	// hour, or a minute when it gave neither.
	Until time.Time
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%s: the token endpoint limits the rate of mints (%d); asked again after %s",
		e.Kind, e.Status, e.Until.UTC().Format(time.RFC3339))
}

// Bounds of a rate limit's wait.
const (
	minLimited     = time.Second
	maxLimited     = time.Hour
	defaultLimited = time.Minute
)

// rateLimited returns the *RateLimitedError of a token endpoint's answer
// with the given status and header, or nil when the answer is not one
// that limits the rate: a 429; a 503 with Retry-After; and, when github
// is set, a 403 with Retry-After or with X-Ratelimit-Remaining: 0, as
// GitHub answers for its rate limits.
func rateLimited(kind string, status int, h http.Header, now time.Time, github bool) *RateLimitedError {
	retry := h.Get("Retry-After")
	switch {
	case status == http.StatusTooManyRequests:
	case status == http.StatusServiceUnavailable && retry != "":
	case github && status == http.StatusForbidden && (retry != "" || h.Get("X-Ratelimit-Remaining") == "0"):
	default:
		return nil
	}
	wait := defaultLimited
	if d, ok := protocol.RetryAfter(h, now); ok {
		wait = d
	} else if reset, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64); err == nil && github {
		wait = time.Unix(min(max(reset, 0), now.Add(maxLimited).Unix()), 0).Sub(now)
	}
	wait = min(max(wait, minLimited), maxLimited)
	return &RateLimitedError{Kind: kind, Status: status, Until: now.Add(wait)}
}

// refusal is the error of a token endpoint's answer with the given
// status and header that gave no token: a *RateLimitedError (see
// rateLimited), or for any other 4xx a *RefusedError with the OAuth
// error code when it is plain and holds none of the values sent (a
// client secret or refresh token of letters and _ alone, echoed as the
// code, would be kept in the mint's state and audit message); nil for
// any other answer.
func refusal(kind string, status int, h http.Header, now time.Time, github bool, code string, sent ...string) error {
	if rl := rateLimited(kind, status, h, now, github); rl != nil {
		return rl
	}
	if status < 400 || status >= 500 {
		return nil
	}
	if !plainCodeRE.MatchString(code) || slices.ContainsFunc(sent, func(v string) bool { return v != "" && strings.Contains(code, v) }) {
		code = ""
	}
	return &RefusedError{Kind: kind, Status: status, Code: code}
}

type statusError int

func (s statusError) Error() string { return fmt.Sprintf("the token endpoint answered %d", int(s)) }

// scrubbed is err with the given values cut out of its text.
func scrubbed(err error, values ...string) error {
	text := err.Error()
	for _, v := range values {
		if v != "" {
			text = strings.ReplaceAll(text, v, "[value]")
		}
	}
	return errors.New(text)
}
