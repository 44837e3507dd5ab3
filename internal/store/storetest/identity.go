package storetest

import (
	"encoding/hex"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// testIdentity: a store has an identity of 16 random bytes, hex, the same
// at every call.
func testIdentity(t *testing.T, s store.Store) {
	ctx := t.Context()
	id, err := s.Identity(ctx)
	if b, herr := hex.DecodeString(id); err != nil || herr != nil || len(b) != 16 {
		t.Fatalf("Identity() = %q, %v; want 32 hex digits", id, err)
	}
	answer(s.Identity(ctx)).is(t, "Identity() again", id)
}
