package storetest

import (
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

func testSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	ended := func(id string) bool {
		t.Helper()
		got, err := s.SessionEnded(ctx, id)
		if err != nil {
			t.Fatalf("SessionEnded(%q) = %v, want nil", id, err)
		}
		return got
	}
	if ended("s-1") {
		t.Fatalf("SessionEnded(s-1) before it ended = true, want false")
	}
	seq := lastChange(t, s)
	must(t, "EndSession(s-1)", s.EndSession(ctx, "s-1", at(100), at(0)))
	if err := s.EndSession(ctx, "s-1", at(100), at(0)); err != nil {
		t.Errorf("EndSession(s-1) again = %v, want nil", err)
	}
	noChange(t, s, "EndSession", seq)
	if !ended("s-1") {
		t.Errorf("SessionEnded(s-1) after EndSession = false, want true")
	}
	if ended("s-2") {
		t.Errorf("SessionEnded(s-2), never ended = true, want false")
	}
	// Ending another session once s-1 has expired forgets s-1.
	must(t, "EndSession(s-2)", s.EndSession(ctx, "s-2", at(300), at(200)))
	if ended("s-1") {
		t.Errorf("SessionEnded(s-1) past its expiry, after another ended = true, want it forgotten")
	}
	if !ended("s-2") {
		t.Errorf("SessionEnded(s-2) = false, want true")
	}
}
