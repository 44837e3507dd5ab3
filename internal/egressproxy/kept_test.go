package egressproxy_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// keptNowhere fails t when any of secrets is in what the broker keeps:
// the audit rows in the store, the journal file, the broker's and the
// proxy's log lines, and the admin API's GET /api/audit. It returns the
// audit rows.
func keptNowhere(t *testing.T, f *fixture, secrets ...string) []store.AuditEntry {
	t.Helper()
	ctx := context.Background()
	if err := f.b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := f.b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(f.b.Server.Journal.Path())
	if err != nil {
		t.Fatalf("read the journal: %v", err)
	}
	api := f.b.Admin("GET", "/api/audit?limit=1000", f.b.AdminToken, nil)
	if api.StatusCode != 200 {
		t.Fatalf("GET /api/audit = %d %s", api.StatusCode, api.Body)
	}
	kept := map[string]string{
		"the audit rows": fmt.Sprintf("%+v", rows),
		"the journal":    string(journal),
		"the log":        f.logs.String(),
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

// TestAudit_TokenAsHostIsNeverKept: inside an intercepted tunnel, a
// request whose Host is a token (the box's own, another box's, a grant)
// is refused, and the refusal, which quotes that Host, is kept with the
// token replaced: in the store's audit rows, the journal, the log and
// GET /api/audit. So is a CONNECT that names a token as its host.
func TestAudit_TokenAsHostIsNeverKept(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddBox("other")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{f.token, other, grant} {
		status, body := tunnelRequest(t, f, f.token, "GET /v1/x HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		if status != http.StatusForbidden {
			t.Errorf("a token as the tunnel's Host = %d %s, want 403", status, body)
		}
	}
	if resp, body, _ := connect(t, f, other+":443", basic(f.token)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT to a token = %d %s, want 403", resp.StatusCode, body)
	}
	if seen := f.up.all(); seen != "" {
		t.Errorf("the host received a request:\n%s", seen)
	}
	rows := keptNowhere(t, f, f.token, other, grant, strings.ToLower(other))
	hosts := 0
	for _, e := range rows {
		if e.Reason == "host" {
			hosts++
			if !strings.Contains(e.Message, "a Host other than the tunnel's") {
				t.Errorf("the Host refusal's row = %q, want it to say the Host is not the tunnel's, quoting nothing the box sent", e.Message)
			}
		}
	}
	if hosts != 3 {
		t.Errorf("audit rows of Host refusals = %d, want 3", hosts)
	}
}

// TestProxy_TokenAsMethodInTheTunnelIsRefused: a request in an
// intercepted tunnel whose method is a token (another box's, a grant) is
// refused by the broker's method check as on /egress/NAME: a 405 with an
// Allow header, nothing sent to the host, and the method kept as OTHER.
// Refused before a box is known, the 405s are kept as the first on its
// own and the rest in one tally, as the window ends.
func TestProxy_TokenAsMethodInTheTunnelIsRefused(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddBox("other")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{other, grant, "TRACE"} {
		status, body := tunnelRequest(t, f, f.token, m+" /v1/x HTTP/1.1\r\nHost: "+f.host+"\r\nConnection: close\r\n\r\n")
		if status != http.StatusMethodNotAllowed || !strings.Contains(body, "invalid_request_error") {
			t.Errorf("%.12s… as the method in the tunnel = %d %s, want a 405 refusal", m, status, body)
		}
	}
	if seen := f.up.all(); seen != "" {
		t.Errorf("the host received a request:\n%s", seen)
	}
	f.b.Server.Broker.FlushTally()
	rows := keptNowhere(t, f, other, grant)
	refused := 0
	for _, e := range rows {
		if e.Status == http.StatusMethodNotAllowed {
			refused++
			if e.Method != broker.OtherMethod {
				t.Errorf("a 405's audit row names the method %q, want %s", e.Method, broker.OtherMethod)
			}
		}
	}
	if refused != 2 {
		t.Errorf("audit rows of 405s = %d, want 2 (the first, and the tally of the rest)", refused)
	}
}
