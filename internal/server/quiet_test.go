package server_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServer_MalformedAnswerRepeatingTheCredentialIsNotLogged: an
// upstream that answers with what it was sent as its status line (its
// x-api-key, its Authorization) makes Go's transport fail with an error
// that quotes it. Inference, decide and Fountain each refuse the call with
// a 502, and neither the refusal nor the broker's log holds the operator's
// Anthropic key or Fountain key.
func TestServer_MalformedAnswerRepeatingTheCredentialIsNotLogged(t *testing.T) {
	const (
		anthropicKey = "sk-ant-api03-ECHOED0123456789abcdefghij"
		fountainKey  = "fk-live-ECHOED0123456789abcdefghij"
	)
	echo, _ := url.Parse("http://" + upstreamtest.EchoStatus(t))
	var logs logBuffer
	b := brokertest.New(t, brokertest.Options{Fountain: true, Logs: &logs, Config: func(c *server.Config) {
		c.AnthropicURL, c.FountainURL = echo, echo
	}})
	b.SetCredential("anthropic", anthropicKey)
	b.SetCredential("fountain", fountainKey)
	token := b.AddBox("a")
	b.Report(token, brokertest.Entry("inference", "agent", "decide"), brokertest.Entry("fountain", "agent", "sandboxes"))
	calls := []struct{ route, method, path, body string }{
		{"inference", "POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5,"messages":[]}`},
		{"decide", "POST", protocol.RouteDecide, `{"model":"m","state":{},"questions":{"q":{"type":"noul","instructions":"Yes?","criteria":{}}}}`},
		{"fountain", "GET", "/fountain/api/sandboxes", ""},
	}
	for _, c := range calls {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		resp := b.Do(c.method, c.path, token, body, nil)
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %s %s = %d %s, want 502", c.route, c.method, c.path, resp.StatusCode, resp.Body)
		}
		for _, key := range []string{anthropicKey, fountainKey} {
			if bytes.Contains(resp.Body, []byte(key)) {
				t.Errorf("%s: the refusal holds a key: %s", c.route, resp.Body)
			}
		}
	}
	text := logs.String()
	if !strings.Contains(text, "malformed HTTP") {
		t.Fatalf("the log holds no transport error, so this test shows nothing:\n%s", text)
	}
	for _, key := range []string{anthropicKey, fountainKey} {
		if strings.Contains(text, key) {
			t.Errorf("the log holds a key (%s…):\n%s", key[:12], text)
		}
	}
}
