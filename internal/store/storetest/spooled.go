package storetest

import (
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// spooledTests are the suite's tests of store.Spooled, run by Run.
var spooledTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"ApplySpooledOnce", testApplySpooledOnce},
}

// testApplySpooledOnce: a spooled batch applies its settlements and
// audit entries once, however often it is replayed; a settlement of a
// removed box is dropped, not an error that would hold the spool.
func testApplySpooledOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 10_000_000, UpdatedAt: at(1)}), nil)
	id, err := s.Reserve(ctx, store.Reservation{Box: "alpha", Month: "2026-10", Amount: 500_000, At: at(2)})
	if err != nil || id == 0 {
		t.Fatalf("Reserve = %d, %v", id, err)
	}
	settle := []store.Settlement{
		{Reservation: id, Box: "alpha", Month: "2026-10", Charge: 1_000,
			Usage: []store.Usage{{Box: "alpha", Month: "2026-10", PayerKind: "shared", Model: "m", Calls: 1, InputTokens: 10, Cost: 1_000}}},
		{Box: "gone", Month: "2026-10", Charge: 7},
	}
	audit := []store.AuditEntry{{Box: "alpha", At: at(3), Method: "POST", Route: "/llm/anthropic/v1/messages", Capability: "inference", Words: []string{"agent"}, Status: 200}}
	for i := range 3 {
		applied, err := s.ApplySpooled(ctx, "k1", settle, audit)
		if err != nil {
			t.Fatalf("ApplySpooled #%d = %v", i+1, err)
		}
		if applied != (i == 0) {
			t.Errorf("ApplySpooled #%d applied = %v, want %v", i+1, applied, i == 0)
		}
	}
	tallies, err := s.Tallies(ctx, "alpha", "2026-10")
	if err != nil || len(tallies) != 1 || tallies[0].Spent != 1_000 || tallies[0].Reserved != 0 {
		t.Errorf("Tallies after three replays = %+v, %v, want spent 1000 and nothing reserved", tallies, err)
	}
	usage, err := s.ListUsage(ctx, "alpha", "2026-10")
	if err != nil || len(usage) != 1 || usage[0].Calls != 1 {
		t.Errorf("ListUsage after three replays = %+v, %v, want one call", usage, err)
	}
	entries, err := s.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 10})
	if err != nil || len(entries) != 1 {
		t.Errorf("ListAudit after three replays = %d entries, %v, want 1", len(entries), err)
	}
	// Another key is another batch.
	if applied, err := s.ApplySpooled(ctx, "k2", settle[:1], nil); err != nil || !applied {
		t.Errorf("ApplySpooled(k2) = %v, %v, want applied", applied, err)
	}
	if tallies, _ := s.Tallies(ctx, "alpha", "2026-10"); len(tallies) != 1 || tallies[0].Spent != 2_000 {
		t.Errorf("Tallies after k2 = %+v, want spent 2000", tallies)
	}
}
