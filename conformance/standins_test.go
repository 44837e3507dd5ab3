package conformance

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/protocol"
)

// newStandIns serves the stand-ins for a test.
func newStandIns(t *testing.T) *standIns {
	t.Helper()
	s := startStandIns("sk-ant-api03-conformance-test", "fountain-test")
	t.Cleanup(s.close)
	return s
}

// call sends a request and returns the status, headers and body.
func call(t *testing.T, method, url string, header http.Header, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestAnthropicStandIn_Routes(t *testing.T) {
	s := newStandIns(t)
	key := http.Header{"X-Api-Key": {"sk-ant-api03-conformance-test"}}
	tests := []struct {
		name   string
		method string
		path   string
		header http.Header
		body   string
		want   int
	}{
		{"no key", http.MethodPost, "/v1/messages", nil, string(messagesBody(false)), http.StatusUnauthorized},
		{"another key", http.MethodGet, "/v1/models", http.Header{"X-Api-Key": {"sk-ant-other"}}, "", http.StatusUnauthorized},
		{"the key as a bearer", http.MethodGet, "/v1/models", http.Header{"Authorization": {"Bearer sk-ant-api03-conformance-test"}}, "", http.StatusOK},
		{"messages", http.MethodPost, "/v1/messages", key, string(messagesBody(false)), http.StatusOK},
		{"messages that are not JSON", http.MethodPost, "/v1/messages", key, "nope", http.StatusBadRequest},
		{"count tokens", http.MethodPost, "/v1/messages/count_tokens", key, string(messagesBody(false)), http.StatusOK},
		{"models", http.MethodGet, "/v1/models", key, "", http.StatusOK},
		{"a model", http.MethodGet, "/v1/models/claude-conformance", key, "", http.StatusOK},
		{"complete", http.MethodPost, "/v1/complete", key, "{}", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, body := call(t, tt.method, s.anthropic.URL+tt.path, tt.header, tt.body)
			if got != tt.want {
				t.Errorf("%s %s = %d, want %d (%s)", tt.method, tt.path, got, tt.want, body)
			}
		})
	}
	if n := s.log.len(); n != len(tests) {
		t.Errorf("the log holds %d exchanges, want %d", n, len(tests))
	}
	for _, e := range s.log.since(0) {
		if e.Upstream != upstreamAnthropic || e.Status == 0 {
			t.Errorf("exchange %s %s recorded as %q with status %d", e.Method, e.Path, e.Upstream, e.Status)
		}
	}
}

func TestAnthropicStandIn_StructuredOutput(t *testing.T) {
	s := newStandIns(t)
	body := `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"?"}],` +
		`"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"choice":{"type":"string","enum":["b","a"]},"noul":{"type":"number","minimum":0,"maximum":1}}}}}}`
	status, _, answer := call(t, http.MethodPost, s.anthropic.URL+"/v1/messages", http.Header{"X-Api-Key": {"sk-ant-api03-conformance-test"}}, body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, answer)
	}
	var msg struct {
		Model   string `json:"model"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(answer, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Model != "m" || len(msg.Content) != 1 || msg.Content[0].Type != "text" {
		t.Fatalf("answer = %s, want the model asked and one text block", answer)
	}
	if want := `{"choice":"b","noul":0.5}`; msg.Content[0].Text != want {
		t.Errorf("text = %s, want %s", msg.Content[0].Text, want)
	}
	if e := s.log.since(0)[0]; !bytes.Equal(e.Answer, answer) || e.Body == nil || string(e.Body) != body {
		t.Errorf("the log did not record the exchange as it was: %+v", e)
	}
}

func TestAnthropicStandIn_Streams(t *testing.T) {
	s := newStandIns(t)
	status, header, answer := call(t, http.MethodPost, s.anthropic.URL+"/v1/messages", http.Header{"X-Api-Key": {"sk-ant-api03-conformance-test"}}, string(messagesBody(true)))
	if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q", status, header.Get("Content-Type"))
	}
	var events []string
	var text strings.Builder
	for _, block := range strings.Split(strings.TrimSpace(string(answer)), "\n\n") {
		name, data, ok := strings.Cut(block, "\ndata: ")
		if !ok {
			t.Fatalf("an event without data: %q", block)
		}
		events = append(events, strings.TrimPrefix(name, "event: "))
		var ev struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", name, err)
		}
		text.WriteString(ev.Delta.Text)
	}
	got := strings.Join(events, " ")
	if !regexp.MustCompile(`^message_start content_block_start ping (content_block_delta )+content_block_stop message_delta message_stop$`).MatchString(got) {
		t.Errorf("events = %s", got)
	}
	if text.String() != "Hello from the conformance stand-in." {
		t.Errorf("text = %q", text.String())
	}
}

func TestFountainStandIn(t *testing.T) {
	s := newStandIns(t)
	auth := http.Header{"Authorization": {"Bearer fountain-test"}}
	if status, _, _ := call(t, http.MethodGet, s.fountain.URL+"/api/conversations", nil, ""); status != http.StatusUnauthorized {
		t.Errorf("no bearer = %d, want 401", status)
	}
	status, _, body := call(t, http.MethodPost, s.fountain.URL+"/api/conversations", auth, "{}")
	var conv struct {
		ID string `json:"id"`
	}
	if status != http.StatusCreated || json.Unmarshal(body, &conv) != nil || !strings.HasPrefix(conv.ID, "conv_") {
		t.Errorf("POST /api/conversations = %d %s, want 201 with a conv_ id", status, body)
	}
	status, _, body = call(t, http.MethodDelete, s.fountain.URL+"/api/sandboxes/s1", auth, "")
	if status != http.StatusOK || string(body) != `{"method":"DELETE","path":"/api/sandboxes/s1"}` {
		t.Errorf("DELETE /api/sandboxes/s1 = %d %s", status, body)
	}
}

func TestEchoStandIn(t *testing.T) {
	s := newStandIns(t)
	status, header, body := call(t, http.MethodPut, s.echo.URL+"/a/b?x=1", http.Header{"Authorization": {"Bearer v"}}, "")
	if status != http.StatusOK || header.Get("X-Echo-Authorization") != "Bearer v" || string(body) != `{"path":"/a/b","query":"x=1"}` {
		t.Errorf("PUT /a/b?x=1 = %d, X-Echo-Authorization %q, %s", status, header.Get("X-Echo-Authorization"), body)
	}
}

func TestNamesWord(t *testing.T) {
	tests := []struct {
		msg, word string
		want      bool
	}{
		{"does not list CONFORMANCE in its scope", "CONFORMANCE", true},
		{"it lists CONFORMANCE_OTHER", "CONFORMANCE", false},
		{`Add "agent" to that scope`, "agent", true},
		{"agents only", "agent", false},
		{"CONFORMANCE_OTHER, then CONFORMANCE.", "CONFORMANCE", true},
		{"inference-x", "inference", false},
		{"", "agent", false},
	}
	for _, tt := range tests {
		if got := namesWord(tt.msg, tt.word); got != tt.want {
			t.Errorf("namesWord(%q, %q) = %v, want %v", tt.msg, tt.word, got, tt.want)
		}
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{`{"error":"plain"}`, "plain"},
		{`{"type":"error","error":{"type":"permission_error","message":"nested"}}`, "nested"},
		{`{"message":"elsewhere"}`, ""},
		{`not json`, ""},
	}
	for _, tt := range tests {
		if got := message([]byte(tt.body)); got != tt.want {
			t.Errorf("message(%s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestIsDeclarationRefusal(t *testing.T) {
	declared := &protocol.Declaration{Capabilities: []protocol.Capability{{Name: "feedback", Broker: "lobby", Scope: []string{"passive"}}}}
	tests := []struct {
		name string
		msg  string
		want bool
	}{
		{"never reported", protocol.DeclaredRefusal(nil, "lobby", "feedback", "agent"), true},
		{"no entry", protocol.DeclaredRefusal(declared, "lobby", "egress", "X"), true},
		{"no word", protocol.DeclaredRefusal(declared, "lobby", "feedback", "agent"), true},
		{"policy", "The box's owner has not consented to sharing feedback.", false},
	}
	for _, tt := range tests {
		if got := isDeclarationRefusal(tt.msg); got != tt.want {
			t.Errorf("isDeclarationRefusal(%s: %q) = %v, want %v", tt.name, tt.msg, got, tt.want)
		}
	}
}

func TestValidator(t *testing.T) {
	v, err := newValidator()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		def   string
		body  string
		valid bool
	}{
		{"declarationKept", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}],"at":"2026-01-01T00:00:00.000Z"}`, true},
		{"declarationKept", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`, false},
		{"declarationKept", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["a\u0001"]}],"at":"x"}`, false},
		{"declarationKept", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent","agent"]}],"at":"x"}`, false},
		{"refusal", `{"error":"no"}`, true},
		{"refusal", `{"type":"error","error":{"type":"permission_error","message":"no"}}`, true},
		{"refusal", `{"error":{"type":"permission_error"}}`, false},
		{"refusal", `{"message":"no"}`, false},
		{"payer", `{"kind":"visitor","principal":"github:someone"}`, true},
		{"payer", `{"kind":"shared","principal":null}`, true},
		{"payer", `{"kind":"visitor","principal":"two words"}`, false},
		{"payer", `{"kind":"house"}`, false},
		{"decideResponse", `{"model":"m","answers":{"q":{"type":"noul","noul":0.5}}}`, true},
		{"decideResponse", `{"model":"m","answers":{"q":{"type":"noul","noul":2}}}`, false},
		{"decideResponse", `{"model":"m","answers":{"q":{"type":"unsupported"}}}`, true},
		{"decideResponse", `{"answers":{}}`, false},
		{"refusal", `not json`, false},
	}
	for _, tt := range tests {
		got := v.validate(tt.def, []byte(tt.body))
		if (got == "") != tt.valid {
			t.Errorf("validate(%s, %s) = %q, want valid %v", tt.def, tt.body, got, tt.valid)
		}
	}
}
