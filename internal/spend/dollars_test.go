package spend_test

import (
	"testing"

	"github.com/intentius/boxbroker/internal/spend"
)

// TestFormatDollars: an amount of dollars as a view carries it is
// written as its micro-dollars are, rounded to the nearest micro-dollar,
// and Micros undoes Dollars.
func TestFormatDollars(t *testing.T) {
	tests := []struct {
		usd  float64
		want string
	}{
		{0, "$0.00"},
		{25.5, "$25.50"},
		{0.0191, "$0.0191"},
		{0.000001, "$0.000001"},
		{0.0000004, "$0.00"},
		{0.0000006, "$0.000001"},
		{-1.25, "-$1.25"},
		{1234.567891, "$1234.567891"},
	}
	for _, tt := range tests {
		if got := spend.FormatDollars(tt.usd); got != tt.want {
			t.Errorf("FormatDollars(%v) = %q, want %q", tt.usd, got, tt.want)
		}
	}
	for _, m := range []int64{0, 1, 19_100, 25_500_000, -1_250_000, 1_000_000_000_000_000} {
		if got := spend.Micros(spend.Dollars(m)); got != m {
			t.Errorf("Micros(Dollars(%d)) = %d", m, got)
		}
	}
}

// TestFormatTokens: a count of tokens is written in K or M only when it
// is whole so.
func TestFormatTokens(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1K"}, {1500, "1500"}, {200_000, "200K"}, {1_000_000, "1M"}, {1_500_000, "1500K"}, {1_000_001, "1000001"},
	}
	for _, tt := range tests {
		if got := spend.FormatTokens(tt.n); got != tt.want {
			t.Errorf("FormatTokens(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
