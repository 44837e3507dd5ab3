package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

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
	var logs brokertest.Buffer
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

// TestServer_MalformedTrailerRepeatingTheCredentialIsNotLogged: an
// upstream that answers 200 and ends its chunked body with a malformed
// trailer line repeating the key it was sent makes the body's read fail
// with an error that quotes the line, after the answer began. Neither
// the log nor what the box received holds the operator's Anthropic key
// or Fountain key.
func TestServer_MalformedTrailerRepeatingTheCredentialIsNotLogged(t *testing.T) {
	const (
		anthropicKey = "sk-ant-api03-TRAILER0123456789abcdefghij"
		fountainKey  = "fk-live-TRAILER0123456789abcdefghij"
	)
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent := r.Header.Get("X-Api-Key") + r.Header.Get("Authorization")
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n%s\r\n\r\n", sent)
	})
	var logs brokertest.Buffer
	b := brokertest.New(t, brokertest.Options{Anthropic: echo, FountainHandler: echo, Logs: &logs})
	b.SetCredential("anthropic", anthropicKey)
	b.SetCredential("fountain", fountainKey)
	token := b.AddBox("a")
	b.Report(token, brokertest.Entry("inference", "agent"), brokertest.Entry("fountain", "agent", "sandboxes"))
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5,"messages":[]}`},
		{"GET", "/fountain/api/sandboxes", ""},
	} {
		// The answer may begin before its body breaks off, and then end
		// the connection mid-body: what the box read is judged whole,
		// whether or not the read ended in an error.
		req, err := http.NewRequest(c.method, b.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := b.Client.Do(req)
		if err != nil {
			continue // the box was answered nothing, so nothing of a key
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, key := range []string{anthropicKey, fountainKey} {
			if bytes.Contains(got, []byte(key)) || strings.Contains(fmt.Sprint(resp.Header), key) {
				t.Errorf("%s %s: the answer holds a key: %d %v %s", c.method, c.path, resp.StatusCode, resp.Header, got)
			}
		}
	}
	text := logs.String()
	if !strings.Contains(text, "malformed MIME header") {
		t.Fatalf("the log holds no read error, so this test shows nothing:\n%s", text)
	}
	for _, key := range []string{anthropicKey, fountainKey} {
		if strings.Contains(text, key) {
			t.Errorf("the log holds a key (%s…):\n%s", key[:12], text)
		}
	}
}
