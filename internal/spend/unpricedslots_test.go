package spend

import (
	"fmt"
	"testing"
	"time"
)

// TestUnpriced_SlotsAreTakenOnlyByAnsweredModels: a box naming a new
// junk model on each call whose answer named none the broker read (cut
// off, or encoded), so that the request's model stands for it, would
// take the MaxUnpricedModels models Meter.Unpriced lists and the log
// warns of, and a real unpriced model an upstream answered for
// afterwards would be listed only as "other". Such a model is counted
// under "other" and takes no place; one an answer named takes one.
func TestUnpriced_SlotsAreTakenOnlyByAnsweredModels(t *testing.T) {
	var s unpricedSet
	res := Resolved{As: "claude-opus-4-1", Match: Unpriced}
	now := time.Now()
	for i := range MaxUnpricedModels + 5 {
		if s.note(fmt.Sprintf("claude-junk-%d", i), res, now, false) {
			t.Fatalf("note(claude-junk-%d, request's model) = first, want no warning of a model no answer named", i)
		}
	}
	if !s.note("claude-mystery-9", res, now, true) {
		t.Errorf("note(claude-mystery-9, answered) = not first, want it named and warned of")
	}
	if s.note("claude-mystery-9", res, now, false) {
		t.Errorf("note(claude-mystery-9) again = first, want it counted as named")
	}
	if len(s.byModel) != 2 || s.byModel["other"] == nil || s.byModel["other"].Calls != MaxUnpricedModels+5 ||
		s.byModel["claude-mystery-9"] == nil || s.byModel["claude-mystery-9"].Calls != 2 {
		t.Errorf("unpriced models = %v, want claude-mystery-9 (2 calls) and other (%d)", s.byModel, MaxUnpricedModels+5)
	}
}
