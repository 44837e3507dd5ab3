package server

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/outbox"
)

// TestReady_UnreadableDeadLettersSaySo: /readyz, given a dead-letter
// file that cannot be read, says so and says the spool is degraded,
// rather than nothing, as for no dead letters.
func TestReady_UnreadableDeadLettersSaySo(t *testing.T) {
	out := map[string]any{}
	readyDeadLetters(out, outbox.DeadUnreadable)
	if out["deadLetters"] != "unreadable" || !strings.HasPrefix(out["spool"].(string), "degraded: ") {
		t.Errorf("readyDeadLetters(DeadUnreadable) = %v, want deadLetters unreadable and spool degraded", out)
	}
	out = map[string]any{}
	readyDeadLetters(out, 0)
	if len(out) != 0 {
		t.Errorf("readyDeadLetters(0) = %v, want nothing", out)
	}
}
