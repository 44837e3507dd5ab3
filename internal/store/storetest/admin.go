package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// adminTokens is the store's admin tokens, read by hash and by ID.
func adminTokens(s store.Store) concept[store.AdminToken] {
	type tok = store.AdminToken
	return concept[tok]{set: "CreateAdminToken", del: "DeleteAdminToken", key: func(a tok) string { return fmt.Sprintf("%q", a.ID) },
		write: s.CreateAdminToken, remove: func(ctx context.Context, a tok) error { return s.DeleteAdminToken(ctx, a.ID) },
		reads: []reader[tok]{
			{"AdminTokenByHash", func(a tok) string { return fmt.Sprintf("%q", a.Hash) }, func(ctx context.Context, a tok) (tok, error) { return s.AdminTokenByHash(ctx, a.Hash) }},
			{"AdminToken", nil, func(ctx context.Context, a tok) (tok, error) { return s.AdminToken(ctx, a.ID) }},
		}}
}

func testAdminTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := store.AdminToken{ID: "adm-1", Hash: hash("admin-one"), Name: "laptop", CreatedAt: at(1), Role: store.AdminOperator}
	second := store.AdminToken{ID: "adm-2", Hash: hash("admin-two"), Name: "", CreatedAt: at(2), Role: store.AdminViewer}
	c := adminTokens(s)
	seq := lastChange(t, s)
	c.sets(t, second, first)
	noChange(t, s, "CreateAdminToken", seq)
	c.gets(t, "", first, second)
	c.refuses(t, s, map[string]store.AdminToken{
		"same ID":   {ID: "adm-1", Hash: hash("other"), CreatedAt: at(3), Role: store.AdminOperator},
		"same hash": {ID: "adm-3", Hash: first.Hash, CreatedAt: at(3), Role: store.AdminOperator},
	})

	// A role the store does not know is refused, never kept as it came.
	for _, role := range []store.AdminRole{"", "admin", "Operator"} {
		tok := store.AdminToken{ID: "adm-9", Hash: hash("admin-nine"), CreatedAt: at(3), Role: role}
		if err := s.CreateAdminToken(ctx, tok); err == nil {
			t.Errorf("CreateAdminToken(role %q) = nil, want refused", role)
		}
	}

	list := answer(s.ListAdminTokens(ctx)).must(t, "ListAdminTokens()")
	wantList := []store.AdminToken{
		{ID: "adm-1", Name: "laptop", CreatedAt: at(1), Role: store.AdminOperator},
		{ID: "adm-2", CreatedAt: at(2), Role: store.AdminViewer},
	}
	same(t, "ListAdminTokens() (want oldest first with no hash)", wantList, list)

	c.removes(t, first)
	answer(s.ListAdminTokens(ctx)).is(t, "ListAdminTokens() after delete (want only adm-2)", wantList[1:])
}

func testAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	entries := []store.AuditEntry{
		{Box: "alpha", At: at(1), Method: "POST", Route: "/llm/anthropic/v1/messages", Capability: "inference", Words: []string{"agent"},
			Status: 200, Duration: 1500 * time.Microsecond, UpstreamStatus: 200, PaidBy: "team-b"},
		{Box: "alpha", At: at(2), Method: "POST", Route: "/decide/v1/systemone", Capability: "inference", Words: []string{"decide"},
			Status: 403, Reason: "declaration", Message: "This box's inference capability does not list decide in its scope (it lists agent)."},
		{Box: "", At: at(3), Method: "GET", Route: "/llm/anthropic/v1/models", Capability: "inference", Words: []string{"agent"},
			Status: 403, Reason: "token", Message: "The token is no box's token at this broker."},
		{Box: "beta", At: at(4), Method: "POST", Route: "/api/box/declaration", Capability: "none", Status: 200, Duration: time.Millisecond},
	}
	seq := lastChange(t, s)
	must(t, "AddAudit(2 entries)", s.AddAudit(ctx, entries[:2]))
	if err := s.AddAudit(ctx, entries[2:]); err != nil {
		t.Fatalf("AddAudit(2 more) = %v, want nil (an entry needs no box row)", err)
	}
	wantErr(t, "AddAudit(nil)", s.AddAudit(ctx, nil), nil)
	noChange(t, s, "AddAudit", seq)

	tests := []struct {
		name string
		q    store.AuditQuery
		want []store.AuditEntry
	}{
		{"all", store.AuditQuery{Limit: 10}, []store.AuditEntry{entries[3], entries[2], entries[1], entries[0]}},
		{"limit", store.AuditQuery{Limit: 2}, []store.AuditEntry{entries[3], entries[2]}},
		{"box", store.AuditQuery{Box: "alpha", Limit: 10}, []store.AuditEntry{entries[1], entries[0]}},
		{"since", store.AuditQuery{Box: "alpha", Since: at(2), Limit: 10}, []store.AuditEntry{entries[1]}},
		{"refusals", store.AuditQuery{RefusalsOnly: true, Limit: 10}, []store.AuditEntry{entries[2], entries[1]}},
		{"no such box", store.AuditQuery{Box: "nobox", Limit: 10}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := answer(s.ListAudit(ctx, tt.q)).must(t, fmt.Sprintf("ListAudit(%+v)", tt.q))
			for _, e := range got {
				if e.ID == 0 {
					t.Errorf("ListAudit(%+v) entry with ID 0, want IDs set", tt.q)
				}
			}
			same(t, fmt.Sprintf("ListAudit(%+v)", tt.q), tt.want, noIDs(got))
		})
	}
	if _, err := s.ListAudit(ctx, store.AuditQuery{}); err == nil {
		t.Errorf("ListAudit(limit 0) = nil error, want one")
	}

	// Removing a box keeps its entries.
	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	if got, err := s.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 10}); err != nil || len(got) != 2 {
		t.Errorf("ListAudit(alpha) after DeleteBox = %d, %v, want 2 kept", len(got), err)
	}

	n, err := s.PruneAudit(ctx, at(3))
	if err != nil || n != 2 {
		t.Errorf("PruneAudit(at 3) = %d, %v, want 2", n, err)
	}
	got := answer(s.ListAudit(ctx, store.AuditQuery{Limit: 10})).must(t, "ListAudit after PruneAudit")
	same(t, "ListAudit after PruneAudit", []store.AuditEntry{entries[3], entries[2]}, noIDs(got))
	answer(s.PruneAudit(ctx, at(0))).is(t, "PruneAudit(before everything)", 0)
}

// noIDs is es with each entry's ID zero, to compare with entries as
// written.
func noIDs(es []store.AuditEntry) []store.AuditEntry {
	out := make([]store.AuditEntry, len(es))
	for i, e := range es {
		e.ID = 0
		out[i] = e
	}
	return out
}

// testPruneAuditMany prunes more entries than one chunk holds.
func testPruneAuditMany(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 12000
	batch := make([]store.AuditEntry, 0, 1000)
	for i := range n {
		batch = append(batch, store.AuditEntry{Box: "alpha", At: at(i % 10), Method: "GET", Route: "/r", Capability: "c", Status: 200})
		if len(batch) == cap(batch) {
			must(t, "AddAudit", s.AddAudit(ctx, batch))
			batch = batch[:0]
		}
	}
	pruned, err := s.PruneAudit(ctx, at(5))
	if err != nil || pruned != n/2 {
		t.Errorf("PruneAudit(half of %d) = %d, %v, want %d", n, pruned, err, n/2)
	}
	left, err := s.ListAudit(ctx, store.AuditQuery{Limit: n})
	if err != nil || len(left) != n/2 {
		t.Errorf("ListAudit after pruning half = %d, %v, want %d", len(left), err, n/2)
	}
}
