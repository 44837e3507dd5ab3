package admin

import "testing"

// TestCodeOf_RoundTrips checks that each refusal's status maps back to
// its own code, as the admin client reads it: no two codes share a status.
func TestCodeOf_RoundTrips(t *testing.T) {
	for code, r := range refusals {
		if got := CodeOf(r.status); got != code {
			t.Errorf("CodeOf(%d) = %d, want %d", r.status, got, code)
		}
	}
	if got := CodeOf(500); got != 0 {
		t.Errorf("CodeOf(500) = %d, want 0", got)
	}
}
