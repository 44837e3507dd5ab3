package store

import (
	"testing"
	"time"
)

// TestWindow_Days: the first and last day each window counts, and the
// bucket a call is charged to, on a Wednesday; a week counts Monday to
// Sunday, its bucket named by its Monday.
func TestWindow_Days(t *testing.T) {
	at := time.Date(2026, 12, 9, 15, 4, 5, 0, time.UTC) // a Wednesday
	tests := []struct {
		window, from, to, bucket string
	}{
		{"day", "2026-12-09", "2026-12-09", "2026-12-09"},
		{"week", "2026-12-07", "2026-12-13", "2026-12-07"},
		{"7d", "2026-12-03", "2026-12-09", "2026-12-09"},
	}
	for _, tt := range tests {
		w, err := ParseWindow(tt.window)
		if err != nil {
			t.Fatal(err)
		}
		if from, to, bucket := w.From(at), w.To(at), w.Bucket(at); from != tt.from || to != tt.to || bucket != tt.bucket {
			t.Errorf("%s at %s: from %s to %s, bucket %s; want from %s to %s, bucket %s", tt.window, at, from, to, bucket, tt.from, tt.to, tt.bucket)
		}
	}
	// On the Sunday that ends the week, the week still ends that day.
	sunday := time.Date(2026, 12, 13, 23, 59, 0, 0, time.UTC)
	if w, _ := ParseWindow("week"); w.From(sunday) != "2026-12-07" || w.To(sunday) != "2026-12-13" {
		t.Errorf("week on its Sunday: from %s to %s, want 2026-12-07 to 2026-12-13", w.From(sunday), w.To(sunday))
	}
}
