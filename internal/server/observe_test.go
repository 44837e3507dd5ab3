package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// scrape reads /metrics from the admin listener.
func scrape(t *testing.T, b *brokertest.Broker) string {
	t.Helper()
	resp := b.Admin("GET", "/metrics", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, resp.Body)
	}
	return string(resp.Body)
}

// metric returns the value of the sample named exactly series ("" if absent).
func metric(text, series string) string {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

const messages = `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`

func TestMetrics_AfterRequests(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs})
	const credential = "sk-ant-api03-metrics-credential"
	b.SetCredential("anthropic", credential)
	alpha := b.AddBox("alpha")
	beta := b.AddBox("beta")
	b.Report(alpha, brokertest.Entry("inference", "agent"))
	b.Report(beta, brokertest.Entry("inference"))
	if r := b.Do("POST", protocol.RouteDeclaration, alpha, []byte(`{"nope":1}`), nil); r.StatusCode != 400 {
		t.Fatalf("malformed report = %d", r.StatusCode)
	}
	requests := []struct {
		method, path, token, body string
		want                      int
	}{
		{"POST", "/llm/anthropic/v1/messages", alpha, messages, 200},
		{"POST", "/llm/anthropic/v1/messages", alpha, strings.Replace(messages, `"max_tokens"`, `"stream":true,"max_tokens"`, 1), 200},
		{"GET", "/llm/anthropic/v1/models/claude-secret-model-id", alpha, "", 200},
		{"POST", "/llm/anthropic/v1/messages", beta, messages, 403},
		{"POST", "/llm/anthropic/v1/messages", "bbx_not-a-token", messages, 403},
		{"GET", "/llm/anthropic/v1/nothing", alpha, "", 404},
		{"GET", "/nowhere/at/all", alpha, "", 404},
	}
	for _, rq := range requests {
		if r := b.Do(rq.method, rq.path, rq.token, []byte(rq.body), nil); r.StatusCode != rq.want {
			t.Fatalf("%s %s = %d %s, want %d", rq.method, rq.path, r.StatusCode, r.Body, rq.want)
		}
	}

	text := scrape(t, b)
	tests := []struct {
		series, want string
	}{
		{`boxbroker_requests_total{capability="inference",reason="",route="/llm/anthropic/v1/messages",status="200"}`, "2"},
		{`boxbroker_requests_total{capability="inference",reason="",route="/llm/anthropic/v1/models/{id}",status="200"}`, "1"},
		{`boxbroker_requests_total{capability="inference",reason="declaration",route="/llm/anthropic/v1/messages",status="403"}`, "1"},
		{`boxbroker_requests_total{capability="inference",reason="token",route="/llm/anthropic/v1/messages",status="403"}`, "1"},
		{`boxbroker_requests_total{capability="inference",reason="no route",route="/llm/anthropic/*",status="404"}`, "1"},
		{`boxbroker_requests_total{capability="none",reason="no route",route="{unmatched}",status="404"}`, "1"},
		{`boxbroker_requests_total{capability="none",reason="",route="/api/box/declaration",status="200"}`, "2"},
		{`boxbroker_requests_total{capability="none",reason="malformed report",route="/api/box/declaration",status="400"}`, "1"},
		{`boxbroker_declaration_reports_total{outcome="kept"}`, "2"},
		{`boxbroker_declaration_reports_total{outcome="refused"}`, "1"},
		{`boxbroker_upstream_duration_seconds_count{capability="inference",status="200"}`, "3"},
		{`boxbroker_open_streams{capability="inference"}`, "0"},
		{`boxbroker_grant_checks_total{outcome="accepted"}`, "0"},
		{`boxbroker_request_duration_seconds_count{capability="inference"}`, "6"},
	}
	for _, tt := range tests {
		if got := metric(text, tt.series); got != tt.want {
			t.Errorf("metric %s = %q, want %q", tt.series, got, tt.want)
		}
	}
	for _, secret := range []string{alpha, beta, credential, "claude-secret-model-id", "alpha", "beta", "/nowhere"} {
		if strings.Contains(text, secret) {
			t.Errorf("/metrics holds %q; it must hold no token, credential, box name or raw path", secret)
		}
	}

	// One JSON line per request, with the upstream status where one answered.
	var forwarded, refused int
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		line := sc.Text()
		for _, secret := range []string{alpha, beta, credential, "bbx_not-a-token"} {
			if strings.Contains(line, secret) {
				t.Errorf("log line holds a token or credential: %s", line)
			}
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] != "request" {
			continue
		}
		if rec["route"] == "/llm/anthropic/v1/messages" && rec["status"] == float64(200) {
			forwarded++
			if rec["upstream_status"] != float64(200) || rec["box"] != "alpha" || rec["capability"] != "inference" {
				t.Errorf("forwarded request's log line = %s, want box alpha, capability inference, upstream_status 200", line)
			}
		}
		if rec["refusal"] == "declaration" {
			refused++
			if _, ok := rec["upstream_status"]; ok {
				t.Errorf("refused request's log line = %s, want no upstream_status", line)
			}
		}
	}
	if forwarded != 2 || refused != 1 {
		t.Errorf("log has %d forwarded and %d declaration-refused request lines, want 2 and 1", forwarded, refused)
	}
}

// TestMetrics_OpenStreams holds a stream open upstream and reads the gauge
// while it is open, then after it ends.
func TestMetrics_OpenStreams(t *testing.T) {
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		events := brokertest.SSEEvents("m", "held")
		io.WriteString(w, events[0])
		w.(http.Flusher).Flush()
		<-release
		for _, ev := range events[1:] {
			io.WriteString(w, ev)
		}
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))

	req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", strings.NewReader(messages))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line of the stream = %q, %v", line, err)
	}
	if got := metric(scrape(t, b), `boxbroker_open_streams{capability="inference"}`); got != "1" {
		t.Errorf("open streams while one is open = %q, want 1", got)
	}
	close(release)
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The handler has returned before the server writes the last chunk
	// the client has now read, so the gauge has fallen.
	if got := metric(scrape(t, b), `boxbroker_open_streams{capability="inference"}`); got != "0" {
		t.Errorf("open streams after the stream ended = %q, want 0", got)
	}
}

func TestMetrics_UpstreamFailure(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.AnthropicURL = mustURL(t, deadURL)
	}})
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), nil); r.StatusCode != 502 {
		t.Fatalf("messages to a closed upstream = %d %s, want 502", r.StatusCode, r.Body)
	}
	text := scrape(t, b)
	if got := metric(text, `boxbroker_requests_total{capability="inference",reason="upstream failed",route="/llm/anthropic/v1/messages",status="502"}`); got != "1" {
		t.Errorf("requests refused for a failed upstream = %q, want 1", got)
	}
	if got := metric(text, `boxbroker_upstream_duration_seconds_count{capability="inference",status="error"}`); got != "1" {
		t.Errorf("upstream calls with no answer = %q, want 1", got)
	}
}

func TestReadyz_ClosedStore(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	if r := b.Admin("GET", "/readyz", "", nil); r.StatusCode != 200 {
		t.Fatalf("readyz with the store open = %d, want 200", r.StatusCode)
	}
	b.Server.Store.Close()
	if r := b.Admin("GET", "/readyz", "", nil); r.StatusCode != 503 {
		t.Errorf("readyz with the store closed = %d %s, want 503", r.StatusCode, r.Body)
	}
	if r := b.Admin("GET", "/healthz", "", nil); r.StatusCode != 200 {
		t.Errorf("healthz with the store closed = %d, want 200", r.StatusCode)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestAudit_RefusalAndForwarded(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	const credential = "sk-ant-api03-audit-credential"
	b.SetCredential("anthropic", credential)
	alpha := b.AddBox("alpha")
	b.Report(alpha, brokertest.Entry("inference"))
	if r := b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(messages), nil); r.StatusCode != 403 {
		t.Fatalf("messages without agent = %d, want 403", r.StatusCode)
	}
	b.Report(alpha, brokertest.Entry("inference", "agent"))
	if r := b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(messages), nil); r.StatusCode != 200 {
		t.Fatalf("messages with agent = %d, want 200", r.StatusCode)
	}
	if r := b.Do("POST", "/llm/anthropic/v1/messages", "bbx_unknown", []byte(messages), nil); r.StatusCode != 403 {
		t.Fatalf("messages with an unknown token = %d, want 403", r.StatusCode)
	}
	if r := b.Do("HEAD", "/llm/anthropic/api/hello", "", nil, nil); r.StatusCode != 200 {
		t.Fatalf("hello = %d, want 200", r.StatusCode)
	}
	ctx := context.Background()
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	all, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Two reports, a refusal, a forwarded call, an unknown token; not hello.
	if len(all) != 5 {
		t.Fatalf("audit entries = %d, want 5 (hello is not kept): %+v", len(all), all)
	}
	for _, e := range all {
		if e.Route == "/llm/anthropic/api/hello" {
			t.Errorf("audit kept hello: %+v", e)
		}
		row := fmt.Sprintf("%+v", e)
		for _, secret := range []string{alpha, credential, "bbx_unknown"} {
			if strings.Contains(row, secret) {
				t.Errorf("audit entry holds a token or credential: %s", row)
			}
		}
	}
	// Newest first: unknown token, forwarded call, second report, refusal, first report.
	unknown, forwarded, refused := all[0], all[1], all[3]
	if forwarded.Box != "alpha" || forwarded.Route != "/llm/anthropic/v1/messages" || forwarded.Capability != "inference" ||
		forwarded.Status != 200 || forwarded.UpstreamStatus != 200 || forwarded.Reason != "" || len(forwarded.Words) != 1 || forwarded.Words[0] != "agent" || forwarded.Method != "POST" {
		t.Errorf("forwarded entry = %+v, want alpha's POST messages, inference agent, 200 from upstream", forwarded)
	}
	if refused.Box != "alpha" || refused.Status != 403 || refused.Reason != "declaration" || refused.UpstreamStatus != 0 ||
		!strings.Contains(refused.Message, "does not list agent") {
		t.Errorf("refused entry = %+v, want alpha's 403 for the declaration, naming agent", refused)
	}
	if unknown.Box != "" || unknown.Reason != "token" || unknown.Status != 403 {
		t.Errorf("unknown-token entry = %+v, want no box, refused for the token", unknown)
	}
	if report := all[2]; report.Route != "/api/box/declaration" || report.Capability != "none" || report.Status != 200 {
		t.Errorf("report entry = %+v, want the declaration route", report)
	}

	// The admin API lists the same, by box, refusals only.
	var list struct {
		Entries []struct {
			Box            *string `json:"box"`
			Reason         string  `json:"reason"`
			Message        string  `json:"message"`
			UpstreamStatus *int    `json:"upstreamStatus"`
		} `json:"entries"`
	}
	resp := b.Admin("GET", "/api/audit?box=alpha&refusals=true&since=1h", b.AdminToken, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/audit = %d %s", resp.StatusCode, resp.Body)
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Entries) != 1 || list.Entries[0].Reason != "declaration" || list.Entries[0].Box == nil || *list.Entries[0].Box != "alpha" || list.Entries[0].UpstreamStatus != nil {
		t.Errorf("GET /api/audit?box=alpha&refusals=true = %s, want the one refusal", resp.Body)
	}
	for _, bad := range []string{"?since=yesterday", "?limit=0", "?box=Alpha", "?refusals=maybe"} {
		if r := b.Admin("GET", "/api/audit"+bad, b.AdminToken, nil); r.StatusCode != 400 {
			t.Errorf("GET /api/audit%s = %d, want 400", bad, r.StatusCode)
		}
	}
}

// TestAudit_PrunedPastRetention writes an entry older than the retention
// and lets the writer's first prune remove it.
func TestAudit_PrunedPastRetention(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.AuditRetention = time.Hour }})
	ctx := context.Background()
	old := store.AuditEntry{Box: "alpha", At: time.Now().Add(-2 * time.Hour), Method: "GET", Route: "/r", Capability: "none", Status: 200}
	fresh := old
	fresh.At = time.Now()
	if err := b.Server.Store.AddAudit(ctx, []store.AuditEntry{old, fresh}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Server.Audit.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 10})
	if err != nil || len(got) != 1 || !got[0].At.After(time.Now().Add(-time.Hour)) {
		t.Errorf("audit after pruning past an hour = %+v, %v, want only the fresh entry", got, err)
	}
}

// TestMetrics_GrantChecks counts the payer's grant checks by outcome.
func TestMetrics_GrantChecks(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	for _, v := range []string{"bbg_no-such-grant", "bbg_another-unknown-one"} {
		h := http.Header{"Chant-Grant": {v}}
		if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), h); r.StatusCode != 200 {
			t.Fatalf("messages with an unknown grant = %d %s, want 200 (ignored)", r.StatusCode, r.Body)
		}
	}
	text := scrape(t, b)
	if got := metric(text, `boxbroker_grant_checks_total{outcome="unknown"}`); got != "2" {
		t.Errorf("grant checks ending unknown = %q, want 2", got)
	}
	if strings.Contains(text, "no-such-grant") {
		t.Errorf("/metrics holds a grant value")
	}
}
