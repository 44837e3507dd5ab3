package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/store"
)

// TestRefusals_ReasonInLogAuditAndMetric drives one request of each
// class of refusal an operator alerts on, and reads the reason each left
// in the three places that keep it: the request's log line (refusal),
// its audit row (Reason) and boxbroker_requests_total's reason label.
// Each is the class's own word from capability.Reasons: a budget refusal
// and a missing secret are no longer both "Forbidden".
func TestRefusals_ReasonInLogAuditAndMetric(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs})
	ctx := context.Background()
	tokens := map[string]string{}
	for _, name := range []string{"nocred", "budgeted", "decl", "paused", "egress", "consent"} {
		tok := b.AddBox(name)
		b.Report(tok, brokertest.Entry("inference", "agent"), brokertest.Entry("egress", "UNSET"), brokertest.Entry("feedback", "agent"))
		tokens[name] = tok
	}
	// nocred's call is made before the operator sets a credential.
	tests := []refusalCase{
		{"nocred", "POST", "/llm/anthropic/v1/messages", messages, 403, "/llm/anthropic/v1/messages", capability.ReasonNoCredential},
	}
	run := func(tt refusalCase) {
		t.Helper()
		r := b.Do(tt.method, tt.path, tokens[tt.box], []byte(tt.body), nil)
		if r.StatusCode != tt.status {
			t.Fatalf("%s %s for %s = %d %s, want %d", tt.method, tt.path, tt.box, r.StatusCode, r.Body, tt.status)
		}
	}
	run(tests[0])
	b.SetCredential("anthropic", "sk-ant-api03-reasons-credential")

	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "budgeted", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	box, err := b.Server.Store.Box(ctx, "paused")
	if err != nil {
		t.Fatal(err)
	}
	box.Paused = true
	if err := b.Server.Store.UpdateBox(ctx, box); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	b.Report(tokens["decl"], brokertest.Entry("inference"))

	more := []refusalCase{
		{"budgeted", "POST", "/llm/anthropic/v1/messages", messages, 403, "/llm/anthropic/v1/messages", capability.ReasonBudget},
		{"decl", "POST", "/llm/anthropic/v1/messages", messages, 403, "/llm/anthropic/v1/messages", capability.ReasonDeclaration},
		{"paused", "POST", "/llm/anthropic/v1/messages", messages, 403, "/llm/anthropic/v1/messages", capability.ReasonPaused},
		{"egress", "GET", "/egress/UNSET/v1/thing", "", 403, "/egress/*", capability.ReasonNoSecret},
		{"consent", "POST", "/api/feedback", `{"entries":[{"note":"n"}]}`, 403, "/api/feedback", capability.ReasonConsent},
		{"egress", "DELETE", "/llm/anthropic/v1/messages", "", 405, "/llm/anthropic/*", capability.ReasonMethod},
	}
	for _, tt := range more {
		run(tt)
	}
	tests = append(tests, more...)

	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	b.Server.Outbox.Flush(ctx)
	text := scrape(t, b)
	lines := map[string][]string{} // box → refusal words in its log lines
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec["msg"] != "request" {
			continue
		}
		if w, ok := rec["refusal"].(string); ok {
			box, _ := rec["box"].(string)
			lines[box] = append(lines[box], w)
		}
	}
	for _, tt := range tests {
		if !slices.Contains(capability.Reasons, tt.reason) {
			t.Fatalf("%q is no reason", tt.reason)
		}
		box := tt.box
		if tt.status == http.StatusMethodNotAllowed {
			box = "" // the method is judged before the token is read
		}
		if got := lines[box]; !contains(got, tt.reason) {
			t.Errorf("%s's log lines give refusals %q, want %q among them", tt.box, got, tt.reason)
		}
		entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: box, RefusalsOnly: true, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, e := range entries {
			reasons = append(reasons, e.Reason)
		}
		if !contains(reasons, tt.reason) {
			t.Errorf("%s's audit rows give reasons %q, want %q among them", tt.box, reasons, tt.reason)
		}
		capName := "inference"
		switch {
		case strings.HasPrefix(tt.path, "/egress"):
			capName = "egress"
		case strings.HasPrefix(tt.path, "/api/feedback"):
			capName = "feedback"
		}
		series := `boxbroker_requests_total{capability="` + capName + `",reason="` + tt.reason + `",route="` + tt.route + `",status="` + strconv.Itoa(tt.status) + `"}`
		if got := metric(text, series); got == "" || got == "0" {
			t.Errorf("metric %s = %q, want at least 1", series, got)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "boxbroker_requests_total{") {
			continue
		}
		i := strings.Index(line, `reason="`)
		if i < 0 {
			t.Errorf("%s has no reason label", line)
			continue
		}
		w := line[i+len(`reason="`):]
		w = w[:strings.IndexByte(w, '"')]
		if w != "" && !slices.Contains(capability.Reasons, w) {
			t.Errorf("%s: reason %q is none of capability.Reasons", line, w)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

// refusalCase is one request refused for reason, and where its refusal
// is counted.
type refusalCase struct {
	box, method, path, body string
	status                  int
	route, reason           string
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestMetrics_SpendAndTokensByModelAndPayer makes Messages calls through
// the broker and reads boxbroker_spend_usd_total and
// boxbroker_tokens_total: the measured cost and the stand-in's usage, by
// model and payer kind, with no box's name among the labels.
func TestMetrics_SpendAndTokensByModelAndPayer(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.SetCredential("anthropic", "sk-ant-api03-spend-metrics")
	alpha := b.AddBox("alpha")
	b.Report(alpha, brokertest.Entry("inference", "agent"))
	for _, body := range []string{messages, strings.Replace(messages, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)} {
		if r := b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(body), nil); r.StatusCode != 200 {
			t.Fatalf("messages = %d %s", r.StatusCode, r.Body)
		}
	}
	each := recordedCallCost(t, b)
	text := scrape(t, b)
	// The stand-in answers with the model it was asked for.
	model := "claude-sonnet-4-5"
	tests := []struct {
		series string
		want   float64
	}{
		{`boxbroker_spend_usd_total{model="` + model + `",payer="shared"}`, float64(2*each) / 1e6},
		{`boxbroker_tokens_total{kind="input",model="` + model + `",payer="shared"}`, 24},
		{`boxbroker_tokens_total{kind="output",model="` + model + `",payer="shared"}`, 12},
	}
	for _, tt := range tests {
		got, err := strconv.ParseFloat(metric(text, tt.series), 64)
		if err != nil || got < tt.want*0.999 || got > tt.want*1.001 {
			t.Errorf("metric %s = %q, want %g", tt.series, metric(text, tt.series), tt.want)
		}
	}
	if strings.Contains(text, "alpha") || strings.Contains(text, alpha) {
		t.Errorf("/metrics names the box or holds its token")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}
