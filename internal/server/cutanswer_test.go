package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// cutBeforeBody answers with a status line and a header that declares a
// body of 1,000 bytes, then closes the connection before sending any.
func cutBeforeBody(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	buf.Flush()
	conn.Close()
}

// TestInference_CutAnswerBeforeAnyByteIs502: a non-streaming answer the
// upstream declares and then breaks off before its first byte reaches
// the box as a 502 refusal naming the upstream, not as a connection
// closed with no status line; its audit row says 502 and the refusal's
// bytes, what the box got.
func TestInference_CutAnswerBeforeAnyByteIs502(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(cutBeforeBody))
	defer up.Close()
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.AnthropicURL, _ = url.Parse(up.URL) }})
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))

	req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", strings.NewReader(messages))
	req.Header.Set("Authorization", "Bearer "+tok)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("a call whose answer the upstream cut before its first byte = %v, want a 502 refusal", err)
	}
	r := brokertest.Response{StatusCode: resp.StatusCode}
	r.Body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if r.StatusCode != http.StatusBadGateway || err != nil {
		t.Fatalf("a call whose answer the upstream cut before its first byte = %d %q (%v), want 502", r.StatusCode, r.Body, err)
	}
	if typ, msg := brokertest.Refusal(r.Body); typ == "" || !strings.Contains(msg, "Anthropic API") {
		t.Errorf("answer = %s, want a refusal naming the Anthropic API", r.Body)
	}
	if err := b.Server.Audit.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Server.Outbox.Flush(t.Context())
	entries, err := b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "alpha", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var row store.AuditEntry
	for _, e := range entries {
		if e.Route == "/llm/anthropic/v1/messages" {
			row = e
		}
	}
	if row.Status != http.StatusBadGateway || row.Bytes != int64(len(r.Body)) {
		t.Errorf("audit row: status %d, bytes %d; want %d, %d (what the box got)", row.Status, row.Bytes, http.StatusBadGateway, len(r.Body))
	}
}
