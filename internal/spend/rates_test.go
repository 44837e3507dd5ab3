package spend_test

import (
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/ratelimit"
	"github.com/intentius/boxbroker/internal/spend"
)

// TestRateLimited_SaysTheWaitRetryAfterSays: the refusal's "try again in"
// is Retry-After's whole seconds, rounded up, not a wait a second shorter
// than the header's (59s beside Retry-After: 60).
func TestRateLimited_SaysTheWaitRetryAfterSays(t *testing.T) {
	tests := []struct {
		wait time.Duration
		want string
	}{
		{59400 * time.Millisecond, "try again in 60s."},
		{12 * time.Second, "try again in 12s."},
		{300 * time.Millisecond, "try again in 1s."},
	}
	for _, tt := range tests {
		f := &ratelimit.Refusal{Of: "requests", Used: 60, Max: 60, RetryAfter: tt.wait}
		if msg := spend.RateLimited(f).Message; !strings.Contains(msg, tt.want) {
			t.Errorf("RateLimited(%v) = %q, want %q", tt.wait, msg, tt.want)
		}
	}
}
