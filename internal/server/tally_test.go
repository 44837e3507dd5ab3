package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAudit_UnknownTokensAreAggregated floods the broker from one client
// with requests carrying no box's token, on several routes. Each is
// counted in the metrics, but the audit log and the log keep only the
// first on its own and the rest in one entry and one line for the source,
// as the window ends: a flood cannot fill the disk.
func TestAudit_UnknownTokensAreAggregated(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs})
	alpha := b.AddBox("alpha")
	const flood = 90
	for i := range flood {
		var r brokertest.Response
		switch i % 3 {
		case 0:
			r = b.Do("POST", "/llm/anthropic/v1/messages", "bbx_unknown"+strconv.Itoa(i), []byte(messages), nil)
		case 1:
			r = b.Do("POST", protocol.RouteFeedback, "", []byte(`{"entries":[{}]}`), nil)
		case 2:
			r = b.Do("POST", protocol.RouteDeclaration, "bbx_unknown", []byte(`{"capabilities":[]}`), nil)
		}
		if r.StatusCode != 401 && r.StatusCode != 403 {
			t.Fatalf("request %d with no box's token = %d %s, want 401 or 403", i, r.StatusCode, r.Body)
		}
	}
	b.Report(alpha) // a box's own request is kept on its own as ever
	ctx := context.Background()
	refusals := func() []store.AuditEntry {
		t.Helper()
		if err := b.Server.Audit.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		all, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{RefusalsOnly: true, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return all
	}
	if got := refusals(); len(got) != 1 || got[0].Box != "" || got[0].Reason != "token" {
		t.Fatalf("audit refusals during the flood = %d entries, want the first only", len(got))
	}
	if n := strings.Count(logs.String(), `"refusal":"token"`); n != 1 {
		t.Errorf("log lines for refused tokens during the flood = %d, want 1", n)
	}

	b.Server.Broker.FlushTally() // the window ends
	got := refusals()
	if len(got) != 2 {
		t.Fatalf("audit refusals after the window = %d entries, want 2: %+v", len(got), got)
	}
	var tally store.AuditEntry
	for _, e := range got {
		if strings.Contains(e.Message, "more requests") {
			tally = e
		}
	}
	want := strconv.Itoa(flood-1) + " more requests from 127.0.0.1"
	if tally.Box != "" || tally.Reason != "token" || !strings.Contains(tally.Message, want) || tally.Route != "*" || tally.Method != "POST" {
		t.Errorf("tally entry = %+v, want no box, refused for the token, %q, route *", tally, want)
	}
	lines := strings.Count(logs.String(), `"msg":"token refusals"`)
	if lines != 1 || !strings.Contains(logs.String(), `"source":"127.0.0.1","count":`+strconv.Itoa(flood-1)) {
		t.Errorf("token refusals log lines = %d, want 1 for 127.0.0.1 counting %d:\n%s", lines, flood-1, logs.String())
	}

	// The metrics count every refusal.
	text := scrape(t, b)
	for _, tt := range []struct{ series, want string }{
		{`boxbroker_token_refusals_total{kept="own"}`, "1"},
		{`boxbroker_token_refusals_total{kept="tallied"}`, strconv.Itoa(flood - 1)},
		{`boxbroker_requests_total{capability="inference",reason="token",route="/llm/anthropic/v1/messages",status="403"}`, strconv.Itoa(flood / 3)},
		{`boxbroker_requests_total{capability="feedback",reason="token",route="/api/feedback",status="403"}`, strconv.Itoa(flood / 3)},
		{`boxbroker_requests_total{capability="none",reason="token",route="/api/box/declaration",status="401"}`, strconv.Itoa(flood / 3)},
	} {
		if got := metric(text, tt.series); got != tt.want {
			t.Errorf("metric %s = %q, want %q", tt.series, got, tt.want)
		}
	}

	// The next window begins with a refusal kept on its own again.
	b.Do("GET", "/llm/anthropic/v1/models", "bbx_again", nil, nil)
	if got := refusals(); len(got) != 3 {
		t.Errorf("audit refusals after a new window's first = %d, want 3", len(got))
	}
}

// TestAudit_TokenlessRefusalsAreAggregated floods the broker from one
// client with requests refused before any box is known: 404s with no
// token, each quoting its own path, and 405s judged before the token is
// read. Each was journaled and kept in the audit log on its own (2,000
// requests, 2,000 rows and 1.5 MB); they are kept as bad tokens are, the
// first of each reason on its own and the rest in one entry a window.
func TestAudit_TokenlessRefusalsAreAggregated(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs})
	const flood = 2000
	for i := range flood {
		var r brokertest.Response
		want := 404
		if i%2 == 0 {
			r = b.Do("GET", "/no/such/route/"+strconv.Itoa(i)+"/"+strings.Repeat("p", 600), "", nil, nil)
		} else {
			r = b.Do("PUT", "/llm/anthropic/v1/messages", "", []byte(`{}`), nil)
			want = 405
		}
		if r.StatusCode != want {
			t.Fatalf("request %d with no token = %d %s, want %d", i, r.StatusCode, r.Body, want)
		}
	}
	ctx := context.Background()
	rows := func() []store.AuditEntry {
		t.Helper()
		if err := b.Server.Audit.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		all, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return all
	}
	if got := rows(); len(got) != 2 {
		t.Fatalf("audit rows during the flood = %d, want 2 (the first 404 and the first 405)", len(got))
	}
	b.Server.Broker.FlushTally() // the window ends
	got := rows()
	if len(got) != 4 {
		t.Fatalf("audit rows after the window = %d, want 4: %+v", len(got), got)
	}
	tallied := map[int]bool{}
	for _, e := range got {
		if strings.Contains(e.Message, "more requests") {
			if e.Box != "" || !strings.Contains(e.Message, strconv.Itoa(flood/2-1)+" more requests from 127.0.0.1") {
				t.Errorf("tally entry = %+v, want no box and %d more requests from 127.0.0.1", e, flood/2-1)
			}
			tallied[e.Status] = true
		}
	}
	if !tallied[404] || !tallied[405] {
		t.Errorf("tally entries for statuses %v, want one for 404 and one for 405", tallied)
	}
	if n := strings.Count(logs.String(), `"msg":"request"`); n > 2 {
		t.Errorf("request log lines = %d, want the first of each reason only", n)
	}
	text := scrape(t, b)
	if got := metric(text, `boxbroker_requests_total{capability="inference",reason="method",route="/llm/anthropic/*",status="405"}`); got != strconv.Itoa(flood/2) {
		t.Errorf("405s counted = %q, want %d: the metrics count every refusal", got, flood/2)
	}
}
