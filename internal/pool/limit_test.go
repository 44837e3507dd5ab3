package pool

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPool_OverloadsOfManyModelsAreBounded: a box naming a new model in
// each call (the model is its choice), each answered overloaded, keeps
// at most maxOverloads overloads apart on the entry; the rest are kept
// as one of an unknown model, and so is a model whose name is too long.
func TestPool_OverloadsOfManyModelsAreBounded(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	p := New(Config{Now: func() time.Time { return now }})
	for i := range 1000 {
		p.answered("a", "mallory", RouteMessages, fmt.Sprintf("claude-%d", i), 529, nil, nil)
	}
	p.answered("a", "mallory", RouteMessages, strings.Repeat("m", maxModel+1), 529, nil, nil)
	h := p.health["a"]
	if n := len(h.limits); n != maxOverloads+1 {
		t.Errorf("overloads kept = %d, want %d and one of an unknown model", n, maxOverloads+1)
	}
	if h.limits[Overloaded] == nil {
		t.Errorf("no overload of an unknown model kept past the bound")
	}
	// Once they cool for no one, new models are kept apart again.
	now = now.Add(CoolMax + time.Second)
	p.answered("a", "mallory", RouteMessages, "claude-new", 529, nil, nil)
	if h.limits[overloadKey("claude-new")] == nil {
		t.Errorf("a new model's overload after the others cooled is not kept apart")
	}
}

// TestPool_RetryAfterCools: an entry's 429 cools it for the box for its
// Retry-After, bounded to CoolMax (a number of seconds too large for a
// Duration included), and for the first backoff when the Retry-After is
// none of RFC 9110's forms (a negative, a fraction).
func TestPool_RetryAfterCools(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		retry string
		want  time.Duration
	}{
		{"30", 30 * time.Second},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{"1000000", CoolMax},
		{"99999999999999999999", CoolMax},
		{"-5", CoolBase},
		{"1.5", CoolBase},
		{"soon", CoolBase},
	}
	for _, tt := range tests {
		t.Run(tt.retry, func(t *testing.T) {
			p := New(Config{Now: func() time.Time { return now }})
			p.answered("a", "mallory", RouteMessages, "claude-sonnet-4-5", 429, http.Header{"Retry-After": {tt.retry}}, nil)
			for k, l := range p.health["a"].limits {
				if got := l.boxes["mallory"].until.Sub(now); got != tt.want {
					t.Errorf("Retry-After %q: %s cools mallory for %v, want %v", tt.retry, k, got, tt.want)
				}
			}
			if n := len(p.health["a"].limits); n != 1 {
				t.Errorf("Retry-After %q: %d limits cooling, want 1", tt.retry, n)
			}
		})
	}
}
