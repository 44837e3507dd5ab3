package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// credential is the operator's Anthropic key the broker spends; no box
// ever sees it.
const credential = "sk-ant-api03-E2E-OPERATOR-CREDENTIAL-0123456789"

// gateGuard bounds how long the gated stream waits for its reader before it
// gives up and sends the rest anyway; it only keeps a broken (buffering)
// broker from hanging the test, which then fails on how the gate opened.
const gateGuard = 30 * time.Second

// gatedStream is an Anthropic stand-in whose streamed Messages answers
// stop after message_start until the client says it has read it. A broker
// that buffered the answer would keep message_start from the client, and
// the stream would only go on when gateGuard ran out.
type gatedStream struct {
	open chan struct{} // closed by the test once it has read message_start

	mu     sync.Mutex // guards opener
	opener string     // "client" or "guard", once the gate opened
}

func newGatedStream() *gatedStream { return &gatedStream{open: make(chan struct{})} }

// Opener says who let the stream go on: "client", "guard", or "" before.
func (g *gatedStream) Opener() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opener
}

func (g *gatedStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" || !req.Stream {
		r.Body = io.NopCloser(bytes.NewReader(body))
		brokertest.AnthropicStandIn(w, r)
		return
	}
	events := brokertest.SSEEvents(req.Model, "Hello from the stand-in.")
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, events[0])
	w.(http.Flusher).Flush()
	who := "client"
	select {
	case <-g.open:
	case <-r.Context().Done():
		return
	case <-time.After(gateGuard):
		who = "guard"
	}
	g.mu.Lock()
	g.opener = who
	g.mu.Unlock()
	for _, ev := range events[1:] {
		_, _ = io.WriteString(w, ev)
		w.(http.Flusher).Flush()
	}
}

// setup starts a broker spending credential, enrols box and, when words is
// not nil, reports an inference entry with those scope words.
func setup(t *testing.T, upstream http.Handler, words []string) (*brokertest.Broker, string) {
	t.Helper()
	b := brokertest.New(t, brokertest.Options{Anthropic: upstream})
	b.SetCredential("anthropic", credential)
	token := b.AddBox("e2e")
	if words != nil {
		b.Report(token, brokertest.Entry(protocol.Inference, words...))
	}
	return b, token
}

// checkUpstream holds every request the stand-in received to the broker's
// promises: the operator's credential as x-api-key, no bearer, and the box's
// token nowhere in the path, query, headers or body.
func checkUpstream(t *testing.T, seen []brokertest.Seen, token string) {
	t.Helper()
	for _, s := range seen {
		if got := s.Header.Get("X-Api-Key"); got != credential {
			t.Errorf("upstream %s %s: x-api-key is not the operator's credential (%d bytes)", s.Method, s.Path, len(got))
		}
		if s.Header.Get("Authorization") != "" {
			t.Errorf("upstream %s %s: received an Authorization header", s.Method, s.Path)
		}
		var all bytes.Buffer
		_ = s.Header.Write(&all)
		all.WriteString(s.Path + "?" + s.RawQuery + "\n")
		all.Write(s.Body)
		if strings.Contains(all.String(), token) {
			t.Errorf("upstream %s %s: received the box's token", s.Method, s.Path)
		}
	}
}

// refusalWords is what the 403 for a box without agent must name.
var refusalWords = []string{"inference", "agent"}

// namesInferenceAndAgent reports whether msg names both words.
func namesInferenceAndAgent(msg string) bool {
	for _, w := range refusalWords {
		if !strings.Contains(msg, w) {
			return false
		}
	}
	return true
}
