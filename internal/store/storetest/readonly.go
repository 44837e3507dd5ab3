package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// CreateBoxForReadOnly creates the box "alpha" in s, before the caller
// makes s's database take no write and calls ReadOnly.
func CreateBoxForReadOnly(t *testing.T, s store.Store) {
	t.Helper()
	must(t, "CreateBox(alpha)", s.CreateBox(t.Context(), store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now()}))
}

// ReadOnly checks a store whose database takes no write (each store makes
// its own so: a PostgreSQL standby, a SQLite writer made query-only) and
// holds the box "alpha" (CreateBoxForReadOnly): it answers every read and
// refuses every write with store.ErrUnavailable, never store.ErrRejected:
// an outage, which the spool waits out, not a batch set aside for good.
// The readiness check's write that changes nothing (PruneAudit before the
// year 1) fails too.
func ReadOnly(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	wantErr(t, "Box() with writes refused", second(s.Box(ctx, "alpha")), nil)
	_, applyErr := s.ApplySpooled(ctx, "k", []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 1}}, nil)
	_, pruneErr := s.PruneAudit(ctx, time.Time{})
	for name, err := range map[string]error{"ApplySpooled": applyErr, "PruneAudit": pruneErr} {
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrRejected) {
			t.Errorf("%s() with writes refused = %v, want store.ErrUnavailable and not store.ErrRejected", name, err)
		}
	}
}
