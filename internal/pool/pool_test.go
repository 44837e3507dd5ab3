package pool_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/pool"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func TestOrder_SpreadsBoxesByWeight(t *testing.T) {
	es := []pool.Entry{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}, {Name: "c", Weight: 3}}
	tests := []struct {
		boxes int
		slack float64 // most a count may stray from its share, as a fraction of the boxes
	}{
		{60, 0.12},
		{6000, 0.02},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.boxes), func(t *testing.T) {
			got := map[string]int{}
			for i := 0; i < tt.boxes; i++ {
				got[pool.Order(fmt.Sprintf("box-%d", i), es)[0]]++
			}
			for _, e := range es {
				want := float64(tt.boxes) * float64(e.Weight) / 6
				if math.Abs(float64(got[e.Name])-want) > tt.slack*float64(tt.boxes) {
					t.Errorf("%d boxes: entry %s (weight %d) has %d, want about %.0f", tt.boxes, e.Name, e.Weight, got[e.Name], want)
				}
			}
		})
	}
}

func TestOrder_AddingAnEntryMovesOnlyItsShare(t *testing.T) {
	three := []pool.Entry{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Weight: 1}}
	four := append(append([]pool.Entry(nil), three...), pool.Entry{Name: "d", Weight: 1})
	const n = 4000
	moved := 0
	for i := 0; i < n; i++ {
		box := fmt.Sprintf("box-%d", i)
		before, after := pool.Order(box, three)[0], pool.Order(box, four)[0]
		if before != after {
			if after != "d" {
				t.Fatalf("box %s moved from %s to %s, not to the new entry", box, before, after)
			}
			moved++
		}
	}
	if share := float64(moved) / n; share < 0.2 || share > 0.3 {
		t.Errorf("adding a fourth entry moved %.2f of the boxes, want about 0.25", share)
	}
}

// TestCheckEntry_URLRefusalsSpeakOfTheEntry: a pool entry's URL that is
// not http(s), or holds a user, is refused in the entry's words, never
// with an egress secret's example host or "the secret's value".
func TestCheckEntry_URLRefusalsSpeakOfTheEntry(t *testing.T) {
	for _, raw := range []string{"ftp://gw.example", "gw.example/anthropic", "https://user:pw@gw.example"} {
		_, err := pool.CheckEntry("gw", 1, raw)
		if err == nil {
			t.Errorf("CheckEntry(%q) = nil, want a refusal", raw)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "entry's URL") || strings.Contains(msg, "api.github.com") || strings.Contains(msg, "secret") || strings.Contains(msg, "pw") {
			t.Errorf("CheckEntry(%q) = %q, want it in the entry's words, with no secret's example or the URL's password", raw, msg)
		}
	}
}

func TestCheckEntry(t *testing.T) {
	tests := []struct {
		name   string
		weight int
		url    string
		ok     bool
	}{
		{"team-b", 1, "", true},
		{"b.2", 1000, "https://gw.example/", true},
		{"", 1, "", false},
		{"Upper", 1, "", false},
		{"-dash", 1, "", false},
		{"x", 0, "", false},
		{"x", 1001, "", false},
		{"x", 1, "ftp://h", false},
		{"x", 1, "https://user:pw@h", false},
		{"default", 2, "", false},
		{"default", 1, "https://h", false},
		{"default", 1, "", true},
	}
	for _, tt := range tests {
		_, err := pool.CheckEntry(tt.name, tt.weight, tt.url)
		if (err == nil) != tt.ok {
			t.Errorf("CheckEntry(%q, %d, %q) = %v, want ok %v", tt.name, tt.weight, tt.url, err, tt.ok)
		}
	}
}
