package store

import (
	"math"
	"testing"
)

// TestUsage_AddNeverWraps: sums of usage held at the int64's bound, never
// turned negative, so that a batch of settlements a store would refuse
// cannot be made by adding.
func TestUsage_AddNeverWraps(t *testing.T) {
	tests := []struct {
		a, b, want int64
	}{
		{1, 2, 3},
		{1 << 62, 1 << 62, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
	}
	for _, tt := range tests {
		if got := AddCapped(tt.a, tt.b); got != tt.want {
			t.Errorf("AddCapped(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	u := Usage{InputTokens: 1 << 62, Cost: 1 << 62}
	u.Add(Usage{InputTokens: 1 << 62, Cost: 1 << 62, Calls: 1})
	if u.InputTokens != math.MaxInt64 || u.Cost != math.MaxInt64 || u.Calls != 1 {
		t.Errorf("Usage.Add past the bound = %+v, want InputTokens and Cost at math.MaxInt64", u)
	}
	c := CacheUsage{CacheReadTokens: math.MaxInt64}
	c.Add(CacheUsage{CacheReadTokens: 5})
	if c.CacheReadTokens != math.MaxInt64 {
		t.Errorf("CacheUsage.Add past the bound = %+v", c)
	}
}
