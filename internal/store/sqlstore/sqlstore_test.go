package sqlstore

import (
	"testing"
	"time"
)

// TestTime_ReadsEitherDatabasesTime: a time column scans the same from
// SQLite (UTC microseconds) and PostgreSQL (a time.Time in any zone), and
// NULL as the zero time.
func TestTime_ReadsEitherDatabasesTime(t *testing.T) {
	want := time.Date(2026, 12, 6, 15, 4, 5, 123456000, time.UTC)
	tests := []struct {
		name string
		src  any
		want time.Time
	}{
		{"micros", want.UnixMicro(), want},
		{"timestamptz", want.In(time.FixedZone("x", 3600)), want},
		{"null", nil, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := time.Now()
			if err := Time(&got).Scan(tt.src); err != nil {
				t.Fatalf("Time().Scan(%v) = %v, want nil", tt.src, err)
			}
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("Time().Scan(%v) = %v, want %v in UTC", tt.src, got, tt.want)
			}
		})
	}
	var got time.Time
	if err := Time(&got).Scan("2026-12-06"); err == nil {
		t.Errorf("Time().Scan(a string) = nil, want an error")
	}
}

func TestIn(t *testing.T) {
	tests := []struct {
		from, n int
		want    string
	}{
		{1, 1, "($1)"},
		{2, 3, "($2, $3, $4)"},
	}
	for _, tt := range tests {
		if got := in(tt.from, tt.n); got != tt.want {
			t.Errorf("in(%d, %d) = %q, want %q", tt.from, tt.n, got, tt.want)
		}
	}
}
