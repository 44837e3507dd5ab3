package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// Names of the stand-in upstreams, as an exchange records them.
const (
	upstreamAnthropic = "anthropic"
	upstreamFountain  = "fountain"
	upstreamEcho      = "echo"
)

// exchange is one request a stand-in received and what it answered.
type exchange struct {
	Upstream string
	upstreamtest.Seen
	// Status and Answer are what the stand-in sent back; Answer is the body
	// byte for byte, SSE included.
	Status int
	Answer []byte
}

// dump is every byte of the request as the stand-in received it, for the
// token search: method, path, query, each header's name and values, body.
func (e *exchange) dump() string {
	return dump(e.Method+" "+e.Path+"?"+e.RawQuery+"\n", e.Header, e.Body)
}

// dump is first, then each header's name and values, a line each, then
// body: all that a message carries, to search for a secret.
func dump(first string, header http.Header, body []byte) string {
	var b strings.Builder
	b.WriteString(first)
	for name, values := range header {
		b.WriteString(name + ": " + strings.Join(values, ", ") + "\n")
	}
	b.Write(body)
	return b.String()
}

// upstreamLog records, in order, every exchange any stand-in had.
type upstreamLog struct {
	mu        sync.Mutex // guards exchanges and the exchanges' fields
	exchanges []*exchange
}

// len is how many exchanges the log holds.
func (l *upstreamLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.exchanges)
}

// since returns copies of the exchanges from index mark on.
func (l *upstreamLog) since(mark int) []exchange {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []exchange
	for _, e := range l.exchanges[min(mark, len(l.exchanges)):] {
		out = append(out, *e)
	}
	return out
}

// recording wraps a stand-in's handler so that l records each request it
// receives and each answer it sends.
func recording(l *upstreamLog, upstream string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		e := &exchange{Upstream: upstream, Seen: upstreamtest.Seen{
			Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body,
		}}
		// The request is logged as it arrives, so that a check sees it
		// even while the stand-in is still answering.
		l.mu.Lock()
		l.exchanges = append(l.exchanges, e)
		l.mu.Unlock()
		rw := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rw, r)
		l.mu.Lock()
		e.Status, e.Answer = rw.status, rw.body.Bytes()
		l.mu.Unlock()
	})
}

// recordingWriter keeps a copy of what a stand-in writes.
type recordingWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *recordingWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.body.Write(p)
	return w.ResponseWriter.Write(p)
}

// Flush sends what was written so far, for the SSE stand-in.
func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// standIns are the upstreams the suite serves on loopback ports.
type standIns struct {
	log       upstreamLog
	anthropic *httptest.Server
	fountain  *httptest.Server
	echo      *httptest.Server
}

// startStandIns serves the three stand-ins; close stops them.
func startStandIns(anthropicKey, fountainKey string) *standIns {
	s := &standIns{}
	s.anthropic = httptest.NewServer(recording(&s.log, upstreamAnthropic, anthropicStandIn(anthropicKey)))
	s.fountain = httptest.NewServer(recording(&s.log, upstreamFountain, fountainStandIn(fountainKey)))
	s.echo = httptest.NewServer(recording(&s.log, upstreamEcho, echoStandIn()))
	return s
}

func (s *standIns) close() {
	s.anthropic.Close()
	s.fountain.Close()
	s.echo.Close()
}

// writeJSON answers status with v encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// standInModel is the model the Anthropic stand-in lists.
const standInModel = "claude-conformance"

// anthropicStandIn serves the part of the Anthropic API a broker forwards:
// POST /v1/messages (JSON or SSE, structured output answered from its
// schema), POST /v1/messages/count_tokens, GET /v1/models[/<id>]. It
// answers 401 to any request without key as x-api-key or bearer.
func anthropicStandIn(key string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key && r.Header.Get("Authorization") != "Bearer "+key {
			protocol.WriteRefusal(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
			return
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
			messages(w, r)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
			writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 12})
		case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
			writeJSON(w, http.StatusOK, map[string]any{
				"data":     []any{modelInfo(standInModel)},
				"has_more": false,
				"first_id": standInModel,
				"last_id":  standInModel,
			})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/models/") && len(r.URL.Path) > len("/v1/models/"):
			writeJSON(w, http.StatusOK, modelInfo(strings.TrimPrefix(r.URL.Path, "/v1/models/")))
		default:
			protocol.WriteRefusal(w, http.StatusNotFound, "not_found_error", "Not found")
		}
	})
}

func modelInfo(id string) map[string]any {
	return map[string]any{"type": "model", "id": id, "display_name": "Conformance stand-in", "created_at": "2026-01-01T00:00:00Z"}
}

// messagesRequest is what the stand-in reads of a Messages request.
type messagesRequest struct {
	Model        string          `json:"model"`
	Messages     json.RawMessage `json:"messages"`
	Stream       bool            `json:"stream"`
	OutputConfig *struct {
		Format *struct {
			Type   string         `json:"type"`
			Schema map[string]any `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// messages answers POST /v1/messages.
func messages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		protocol.WriteRefusal(w, http.StatusBadRequest, "invalid_request_error", "a Messages request is a JSON object with model and messages")
		return
	}
	text := "Hello from the conformance stand-in."
	if oc := req.OutputConfig; oc != nil && oc.Format != nil && oc.Format.Type == "json_schema" {
		if oc.Format.Schema == nil {
			protocol.WriteRefusal(w, http.StatusBadRequest, "invalid_request_error", "output_config.format.schema is required")
			return
		}
		out, err := json.Marshal(fromSchema(oc.Format.Schema))
		if err != nil {
			protocol.WriteRefusal(w, http.StatusBadRequest, "invalid_request_error", "output_config.format.schema cannot be answered")
			return
		}
		text = string(out)
	}
	id := "msg_conformance_" + randomHex(8)
	usage := map[string]any{"input_tokens": 12, "output_tokens": 7}
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id":            id,
			"type":          "message",
			"role":          "assistant",
			"model":         req.Model,
			"content":       []any{map[string]any{"type": "text", "text": text}},
			"stop_reason":   "end_turn",
			"stop_sequence": nil,
			"usage":         usage,
		})
		return
	}
	type event struct {
		name string
		data any
	}
	events := []event{
		{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 12, "output_tokens": 1},
		}}},
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}},
		{"ping", map[string]any{"type": "ping"}},
	}
	for _, part := range chunks(text, 3) {
		events = append(events, event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": part}}})
	}
	events = append(events,
		event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		event{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 7}}},
		event{"message_stop", map[string]any{"type": "message_stop"}},
	)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for i, ev := range events {
		if i > 0 && !pause(r.Context(), 2*time.Millisecond) {
			return
		}
		data, _ := json.Marshal(ev.data)
		_, _ = io.WriteString(w, "event: "+ev.name+"\ndata: "+string(data)+"\n\n")
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// pause waits d, or until ctx is done; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// chunks splits s into at most n pieces of about equal length, on rune
// boundaries; an empty s is one empty piece.
func chunks(s string, n int) []string {
	runes := []rune(s)
	if len(runes) == 0 {
		return []string{""}
	}
	size := (len(runes) + n - 1) / n
	var out []string
	for len(runes) > 0 {
		k := min(size, len(runes))
		out = append(out, string(runes[:k]))
		runes = runes[k:]
	}
	return out
}

// fountainStandIn serves Fountain's API under /api/: POST /api/conversations
// starts a conversation, anything else under /api/ echoes its method and
// path. It answers 401 to any request without key as the bearer.
func fountainStandIn(key string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
			return
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/conversations":
			writeJSON(w, http.StatusCreated, map[string]any{"id": "conv_" + randomHex(8)})
		case strings.HasPrefix(r.URL.Path, "/api/"):
			writeJSON(w, http.StatusOK, map[string]any{"method": r.Method, "path": r.URL.Path})
		default:
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
		}
	})
}

// echoStandIn is the egress secret's host: it answers any request 200,
// repeating the Authorization it received in X-Echo-Authorization, with a
// JSON body of the path and query.
func echoStandIn() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		writeJSON(w, http.StatusOK, map[string]any{"path": r.URL.Path, "query": r.URL.RawQuery})
	})
}
