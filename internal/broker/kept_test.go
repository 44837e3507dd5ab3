package broker_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
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
