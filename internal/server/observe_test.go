package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

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
	logs := &syncBuffer{}
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
