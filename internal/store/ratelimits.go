package store

import (
	"context"
	"time"
)

// RateLimit bounds the pace of a box's model calls (Principal "") or of
// its calls one principal pays for: InputTPM input tokens and OutputTPM
// output tokens a minute, and RPM requests a minute. 0 is no bound.
type RateLimit struct {
	Box       string
	Principal string
	InputTPM  int64
	OutputTPM int64
	RPM       int64
	UpdatedAt time.Time
}

// RateCount is what one replica counted against one key of the rate
// limiter over the last minute, as of At: when the store wrote it, by
// the store's clock (ExchangeRates sets it; a replica's own is ignored).
// Key is the limiter's: the box, the principal and the box's enrolment.
type RateCount struct {
	Key          string
	Replica      string
	Requests     int64
	InputTokens  int64
	OutputTokens int64
	At           time.Time
}

// RateLimits keeps the rate limits, and the counts the replicas sharing a
// store exchange to hold them together (package ratelimit).
type RateLimits interface {
	// SetRateLimit creates or replaces the rate limit of l.Box and
	// l.Principal; ErrNotFound if there is no such box.
	SetRateLimit(ctx context.Context, l RateLimit) error
	// ListRateLimits returns the rate limits of box ("" for every box),
	// by box, the box's own first, then by principal.
	ListRateLimits(ctx context.Context, box string) ([]RateLimit, error)
	// DeleteRateLimit removes a rate limit; ErrNotFound if none.
	DeleteRateLimit(ctx context.Context, box, principal string) error
	// ExchangeRates writes mine, one replica's counts (replacing what it
	// wrote before under the same key), stamped by the store's clock,
	// and returns every other replica's counts written within the last
	// within by that clock: replicas' own clocks, which may be seconds
	// apart, judge no count fresh or stale.
	ExchangeRates(ctx context.Context, replica string, mine []RateCount, within time.Duration) ([]RateCount, error)
}
