package defaults

import (
	"log/slog"
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	tests := []struct {
		v, want time.Duration
	}{
		{0, time.Second},
		{-1, time.Second},
		{2 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		v := tt.v
		Positive(&v, time.Second)
		if v != tt.want {
			t.Errorf("Positive(%v, 1s) = %v, want %v", tt.v, v, tt.want)
		}
	}
}

func TestLoggerAndClock(t *testing.T) {
	var l *slog.Logger
	Logger(&l)
	if l != slog.Default() {
		t.Errorf("Logger(nil) = %p, want slog.Default()", l)
	}
	mine := slog.New(slog.DiscardHandler)
	l = mine
	Logger(&l)
	if l != mine {
		t.Errorf("Logger(set) replaced the logger")
	}
	var now func() time.Time
	Clock(&now)
	if now == nil {
		t.Fatal("Clock(nil) left it nil")
	}
	fixed := time.Unix(1, 0)
	now = func() time.Time { return fixed }
	Clock(&now)
	if got := now(); !got.Equal(fixed) {
		t.Errorf("Clock(set)() = %v, want %v", got, fixed)
	}
}
