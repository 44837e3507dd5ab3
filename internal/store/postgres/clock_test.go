package postgres

import (
	"testing"
	"time"
)

// TestClock_IsTheServersNow: Clock reads the server's clock as it runs
// (clock_timestamp, which moves within a transaction), here the same
// machine's, so within a second of time.Now.
func TestClock_IsTheServersNow(t *testing.T) {
	s := open(t, freshSchema(t))
	got, err := s.Clock(t.Context())
	if err != nil {
		t.Fatalf("Clock() = %v", err)
	}
	if d := time.Since(got); d > time.Second || d < -time.Second {
		t.Errorf("Clock() = %s, %s from this machine's clock; want within a second", got, d)
	}
	again, err := s.Clock(t.Context())
	if err != nil || again.Before(got) {
		t.Errorf("Clock() again = %s, %v; want at or after %s", again, err, got)
	}
}
