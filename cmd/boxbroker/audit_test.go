package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAudit_SaysWhenCapped: audit shows --limit entries (100 by
// default) and says on stderr when there are more; --json prints the
// admin API's AuditList; a BOX that is no box is an error saying so. The
// same through the store and through the admin API.
func TestAudit_SaysWhenCapped(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("salad")
	now := time.Now().UTC()
	var entries []store.AuditEntry
	for i := range 120 {
		entries = append(entries, store.AuditEntry{Box: "salad", At: now.Add(-time.Duration(i) * time.Second), Method: "GET",
			Route: fmt.Sprintf("/llm/anthropic/v1/models/%d", i), Capability: "inference", Status: 200})
	}
	if err := b.Server.Store.AddAudit(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
	for _, tt := range storeAndAdminAPI(t, b) {
		t.Run(tt.name, func(t *testing.T) {
			tests := []struct {
				args     []string
				rows     int
				wantMore bool
			}{
				{[]string{"audit", "salad"}, 100, true},
				{[]string{"audit", "salad", "--limit", "120"}, 120, false},
				{[]string{"audit", "salad", "--limit", "119"}, 119, true},
				{[]string{"audit", "salad", "--limit", "500"}, 120, false},
			}
			for _, tc := range tests {
				code, out, errs := runEnv(t, tt.env, "", tc.args...)
				rows := strings.Count(strings.TrimSpace(out), "\n") // the header is the first line
				more := strings.Contains(errs, "there are more")
				if code != 0 || rows != tc.rows || more != tc.wantMore {
					t.Errorf("%q = %d, %d rows, stderr %q; want 0, %d rows, saying there are more: %v", tc.args, code, rows, errs, tc.rows, tc.wantMore)
				}
				if more && !strings.Contains(errs, "--limit") {
					t.Errorf("%q says %q, want it to name --limit", tc.args, errs)
				}
			}
			code, out, errs := runEnv(t, tt.env, "", "audit", "salad", "--json", "--limit", "5")
			var list admin.AuditList
			if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Entries) != 5 || list.Entries[0].Route != "/llm/anthropic/v1/models/0" {
				t.Errorf("audit salad --json --limit 5 = %d %v, %d entries, stderr %q; want the newest 5 as an AuditList", code, err, len(list.Entries), errs)
			}
			code, out, errs = runEnv(t, tt.env, "", "audit", "nosuch")
			if code != 1 || !strings.Contains(errs, "no box named nosuch") || !strings.Contains(errs, "`boxbroker box list`") || out != "" {
				t.Errorf("audit nosuch = %d %q %q, want 1 saying there is no box named nosuch", code, out, errs)
			}
		})
	}
}
