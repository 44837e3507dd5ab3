package ui

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// TestDayChart: the spend picture keeps to now's month, draws a bar for
// each day up to today as a running total, scales to the budget or to
// the spend when it is over, and draws the budget line only for a budget.
func TestDayChart(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC)
	day := func(d int, cost int64) store.DayCost {
		return store.DayCost{Day: time.Date(2026, 2, d, 0, 0, 0, 0, time.UTC), Cost: cost, Calls: 1}
	}
	days := []store.DayCost{
		{Day: time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC), Cost: 9_000_000, Calls: 1}, // last month: left out
		day(1, 250_000), day(3, 500_000), day(10, 250_000),
	}
	tests := []struct {
		name      string
		days      []store.DayCost
		hasBudget bool
		limit     int64
		want      []string
		not       []string
	}{
		{"under budget", days, true, 2_000_000,
			[]string{`class="limit"`, "$1.00 measured over 3 priced calls", "against its budget of $2.00", ">$2.00</text>", "Feb 01", "Feb 26"},
			[]string{"$10.00", "Jan 31"}},
		{"over budget", days, true, 500_000,
			[]string{`class="limit"`, ">$1.00</text>", "against its budget of $0.50"}, nil},
		{"no budget", days, false, 0,
			[]string{">$1.00</text>", "it has no budget of its own"}, []string{`class="limit"`}},
		{"nothing spent", nil, true, 1_000_000,
			[]string{`class="limit"`, "$0.00 measured over 0 priced calls"}, []string{`class="spent"`}},
		{"nothing at all", nil, false, 0,
			[]string{">none</text>"}, []string{`class="limit"`, `class="spent"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dayChart(tt.days, tt.hasBudget, tt.limit, now)
			text := string(c.SVG) + c.Summary
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("dayChart lacks %q:\n%s", w, text)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(text, w) {
					t.Errorf("dayChart holds %q:\n%s", w, text)
				}
			}
		})
	}
	// Three days with spend; ten bars up to today (the 10th), of which
	// the days after the first carry what came before.
	c := string(dayChart(days, true, 2_000_000, now).SVG)
	if n := strings.Count(c, `class="spent"`); n != 3 {
		t.Errorf("dayChart draws %d days' own spend, want 3", n)
	}
	if n := strings.Count(c, `class="prior"`); n != 9 {
		t.Errorf("dayChart draws %d running totals, want 9 (Feb 2 to Feb 10)", n)
	}
}

// BenchmarkSpendPictureRead measures the spend picture's read of a busy
// box's month (31 days at 30 entries an hour, 22,320 entries, beside 20
// other boxes as busy) against the hourly picture's read of its week
// (AuditHours over 7 days), which the box's page made already: the ratio
// of the two is what the new picture adds to the page's reads.
func BenchmarkSpendPictureRead(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	now := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	var batch []store.AuditEntry
	for box := range 21 {
		name := fmt.Sprintf("box-%02d", box)
		for k := range 31 * 24 * 30 {
			at := now.Add(-time.Duration(k) * 2 * time.Minute)
			batch = append(batch, store.AuditEntry{Box: name, At: at, Method: "POST", Route: "/llm/anthropic/v1/messages",
				Capability: "inference", Words: []string{"agent"}, Status: 200, UpstreamStatus: 200, Bytes: 900, Cost: int64(1000 + k%5000)})
			if len(batch) == 4000 {
				if err := st.AddAudit(ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if err := st.AddAudit(ctx, batch); err != nil {
		b.Fatal(err)
	}
	b.Run("AuditHours-7d", func(b *testing.B) {
		for range b.N {
			if _, err := st.AuditHours(ctx, "box-07", now.Add(-7*24*time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AuditDays-month", func(b *testing.B) {
		for range b.N {
			days, err := st.AuditDays(ctx, "box-07", monthStart(now))
			if err != nil || len(days) != 31 {
				b.Fatalf("AuditDays = %d days, %v, want 31", len(days), err)
			}
		}
	})
}
