package server_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// lockedBuffer collects logs written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLeaks runs every route — served, refused, failing upstream — with a
// distinctive credential, secret value and tokens, then greps everything
// the broker produced: no answer carries the credential or the secret
// value, no log line carries either or any token, and no upstream
// received a token.
func TestLeaks(t *testing.T) {
	const (
		credential = "sk-ant-api03-LEAKCANARY-CREDENTIAL-7f3a9c"
		secretVal  = "sv-LEAKCANARY-SECRET-2b8d41"
	)
	var echoSeen brokertest.Recorder
	echoSeen.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A careless API that repeats the key in a header and the body.
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Write([]byte(`{"you_sent":"` + r.Header.Get("Authorization") + `","q":"` + r.URL.RawQuery + `"}`))
	})
	echo := httptest.NewServer(&echoSeen)
	defer echo.Close()
	var logs lockedBuffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs})
	a := b.AddBox("a")
	never := b.AddBox("never")
	b.SetCredential("anthropic", credential)
	b.SetSecret("a", "CANARY", echo.URL, secretVal)
	b.Report(a, brokertest.Entry("inference", "agent", "decide"), brokertest.Entry("egress", "CANARY", "UNHELD"))
	tokens := []string{a, never}

	decide := `{"model":"claude-sonnet-4-5","state":{},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":{"x":"x","y":"y"}}}}`
	requests := []struct {
		method, path, body string
		header             http.Header
	}{
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/llm/anthropic/v1/messages/count_tokens", `{}`, http.Header{"X-Api-Key": {a}}},
		{"GET", "/llm/anthropic/v1/models", ``, http.Header{"X-Api-Key": {a}}},
		{"GET", "/llm/anthropic/v1/models/claude-x", ``, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/complete", `{}`, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/messages", `{}`, http.Header{"X-Api-Key": {never}}},
		{"POST", "/llm/anthropic/v1/messages", `{}`, http.Header{"X-Api-Key": {a + "x"}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/decide/v1/systemone", `{"model":"m"}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + never}}},
		{"GET", "/egress/CANARY/v1/thing?key=" + a, ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/egress/CANARY/v1/thing", `{"x":1}`, http.Header{"X-Api-Key": {a}}},
		{"GET", "/egress/UNHELD/v1", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/egress/OTHER/v1", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/egress/CANARY/v1", ``, http.Header{"Authorization": {"Bearer " + never}}},
		{"GET", "/egress/CANARY/" + a, ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/api/box/declaration", `{"capabilities":"x"}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/api/box/declaration", `{"capabilities":[]}`, http.Header{"Authorization": {"Bearer " + a + "x"}}},
		{"POST", "/api/feedback", `{"entries":[{"note":"n"}]}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/fountain/api/conversations", ``, http.Header{"Authorization": {"Bearer " + a}}},
	}
	var answers strings.Builder
	for _, rq := range requests {
		resp := b.Do(rq.method, rq.path, "", []byte(rq.body), rq.header)
		resp.Header.Write(&answers)
		answers.Write(resp.Body)
	}
	for _, v := range []string{credential, secretVal} {
		if strings.Contains(answers.String(), v) {
			t.Errorf("an answer to a box carried %.24s…", v)
		}
		if strings.Contains(logs.String(), v) {
			t.Errorf("the logs carry %.24s…", v)
		}
	}
	for _, tok := range tokens {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the logs carry a box token")
		}
	}
	var upstream strings.Builder
	for _, seen := range append(b.Upstream.Seen(), echoSeen.Seen()...) {
		seen.Header.Write(&upstream)
		upstream.WriteString(seen.Path + "?" + seen.RawQuery)
		upstream.Write(seen.Body)
	}
	for _, tok := range tokens {
		if strings.Contains(upstream.String(), tok) {
			t.Errorf("an upstream received a box token")
		}
	}
	if !strings.Contains(logs.String(), `"msg":"request"`) {
		t.Errorf("no request was logged: %.300s", logs.String())
	}
}
