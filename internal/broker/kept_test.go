package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// keptNowhere fails t when any of secrets is in what the broker keeps of
// the requests it served: the audit rows in the store, the journal file,
// the log lines in logs, and the admin API's GET /api/audit.
func keptNowhere(t *testing.T, b *brokertest.Broker, logs *brokertest.Buffer, secrets ...string) []store.AuditEntry {
	t.Helper()
	ctx := context.Background()
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(b.Server.Journal.Path())
	if err != nil {
		t.Fatalf("read the journal: %v", err)
	}
	api := b.Admin("GET", "/api/audit?limit=1000", b.AdminToken, nil)
	if api.StatusCode != 200 {
		t.Fatalf("GET /api/audit = %d %s", api.StatusCode, api.Body)
	}
	kept := map[string]string{
		"the audit rows": fmt.Sprintf("%+v", rows),
		"the journal":    string(journal),
		"the log":        logs.String(),
		"GET /api/audit": string(api.Body),
	}
	for where, text := range kept {
		for i, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s hold secret %d (%.12s…)", where, i, s)
			}
		}
	}
	return rows
}

// TestDeclaration_TokenInAReportIsNeverKept: a report whose listing
// title and line, scope words and principals hold tokens (the box's own,
// another box's, a grant, an admin token) is kept with each replaced, in
// the store and wherever the broker records the report.
func TestDeclaration_TokenInAReportIsNeverKept(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs})
	box := b.AddBox("a")
	other := b.AddBox("b")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	report := map[string]any{
		"capabilities": []any{map[string]any{"name": "egress", "broker": "lobby", "scope": []string{"API", grant}}},
		"listing":      map[string]any{"title": box, "line": "see " + other},
		"spend": map[string]any{"month": "2026-10", "usd": 1, "runs": 1, "unpriced": 0,
			"byPrincipal": []any{map[string]any{"principal": b.AdminToken, "usd": 1, "runs": 1, "unpriced": 0}}},
	}
	body, _ := json.Marshal(report)
	if resp := b.Do("POST", protocol.RouteDeclaration, box, body, nil); resp.StatusCode != 200 {
		t.Fatalf("report = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	doc, _, err := b.Server.Store.Declaration(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{box, other, grant, b.AdminToken} {
		if strings.Contains(string(doc), s) {
			t.Errorf("the stored report holds token %d: %s", i, doc)
		}
	}
	if !strings.Contains(string(doc), `"API"`) {
		t.Errorf("the stored report lost its scope word API: %s", doc)
	}
	keptNowhere(t, b, logs, box, other, grant, b.AdminToken)
}

// TestDeclaration_ScrubbedScopeKeptOnce: scope words that differ only in
// the tokens the broker replaces (two tokens of one length, two tokens
// cut short) read the same once replaced; the kept scope, and the answer
// (declarationKept, whose scope items are unique), hold that word once.
func TestDeclaration_ScrubbedScopeKeptOnce(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	box := b.AddBox("a")
	other := b.AddBox("b")
	report := map[string]any{"capabilities": []any{map[string]any{"name": "egress", "broker": "lobby",
		"scope": []string{"API", box, other, token.BoxPrefix + "a", token.BoxPrefix + "b"}}}}
	body, _ := json.Marshal(report)
	resp := b.Do("POST", protocol.RouteDeclaration, box, body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("report = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	var kept protocol.Kept
	if err := json.Unmarshal(resp.Body, &kept); err != nil || len(kept.Capabilities) != 1 {
		t.Fatalf("answer = %s, %v; want one capability", resp.Body, err)
	}
	scope := kept.Capabilities[0].Scope
	seen := map[string]bool{}
	for _, w := range scope {
		if seen[w] {
			t.Errorf("the answer's scope %q holds %q twice", scope, w)
		}
		seen[w] = true
	}
	if len(scope) != 3 || scope[0] != "API" {
		t.Errorf("the answer's scope = %q, want API and one word for each form replaced", scope)
	}
	doc, _, err := b.Server.Store.Declaration(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	var d protocol.Declaration
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if got := d.Capabilities[0].Scope; len(got) != len(scope) {
		t.Errorf("the kept scope = %q, want %q", got, scope)
	}
}
