package broker

import (
	"strconv"
	"testing"
	"time"
)

// TestTally_SourcesAreBounded: refusals from more sources than a window
// tallies apart are tallied together under TallyOther, so a flood from
// many addresses holds bounded memory and writes a bounded number of
// entries.
func TestTally_SourcesAreBounded(t *testing.T) {
	var tl tally
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i := range maxTallySources + 100 {
		src := "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
		if tl.add(src, "token", at, "POST", "/api/feedback", "feedback", 403) && i < maxTallySources {
			t.Fatalf("add(%s) = tallied, want the source's first kept on its own", src)
		}
	}
	if !tl.add("10.0.0.0", "token", at, "GET", "/llm/anthropic/v1/models", "inference", 403) {
		t.Fatalf("a source's second refusal is not tallied")
	}
	got := tl.take()
	if len(got) != 2 {
		t.Fatalf("take() = %d tallies, want 2 (10.0.0.0 and %s): %+v", len(got), TallyOther, got)
	}
	for _, e := range got {
		switch e.Source {
		case TallyOther:
			if e.Count != 100 || e.Route != "/api/feedback" {
				t.Errorf("other = %+v, want 100 refusals of /api/feedback", e)
			}
		case "10.0.0.0":
			if e.Count != 1 || e.Method != "GET" {
				t.Errorf("10.0.0.0 = %+v, want 1 refusal", e)
			}
		default:
			t.Errorf("unexpected tally %+v", e)
		}
	}
	if len(tl.take()) != 0 {
		t.Errorf("take() after take() is not empty")
	}
}
