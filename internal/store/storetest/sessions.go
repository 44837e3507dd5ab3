package storetest

import (
	"fmt"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

func testSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	ended := func(id string) bool {
		t.Helper()
		return answer(s.SessionEnded(ctx, id)).must(t, fmt.Sprintf("SessionEnded(%q)", id))
	}
	if ended("s-1") {
		t.Fatalf("SessionEnded(s-1) before it ended = true, want false")
	}
	seq := lastChange(t, s)
	must(t, "EndSession(s-1)", s.EndSession(ctx, "s-1", at(100), at(0)))
	wantErr(t, "EndSession(s-1) again", s.EndSession(ctx, "s-1", at(100), at(0)), nil)
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
