package broker_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/token"
)

// trailerSeen records the trailer and head of every request an upstream
// receives, after reading its body (when the trailer arrives), and then
// hands it to next with the body put back.
type trailerSeen struct {
	next http.Handler
	mu   sync.Mutex // guards seen
	seen []string
}

func (s *trailerSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, fmt.Sprintf("%s %s\nheader %v\ntrailer %v\n%s", r.Method, r.URL, r.Header, r.Trailer, body))
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.next.ServeHTTP(w, r)
}

func (s *trailerSeen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// sendChunked writes a chunked request to b with body as one chunk and
// the trailer field X-Leak: leak, and returns the answer's status.
func sendChunked(t *testing.T, b *brokertest.Broker, method, path, auth, body, leak string) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: broker\r\n%s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nTrailer: X-Leak\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\nX-Leak: %s\r\n\r\n",
		method, path, auth, len(body), body, leak)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestBroker_RequestTrailerNeverReachesUpstream sends another box's
// token, and a grant, in a chunked request's trailer to every capability
// that forwards (inference, Fountain, egress): the request is served, and
// no upstream receives the trailer or a token.
func TestBroker_RequestTrailerNeverReachesUpstream(t *testing.T) {
	anthropic := &trailerSeen{next: http.HandlerFunc(brokertest.AnthropicStandIn)}
	fountain := &trailerSeen{next: http.HandlerFunc(brokertest.FountainStandIn)}
	host := &trailerSeen{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })}
	hs := httptest.NewServer(host)
	t.Cleanup(hs.Close)
	b := brokertest.New(t, brokertest.Options{Anthropic: anthropic, FountainHandler: fountain})
	box := b.AddBox("a")
	other := b.AddBox("b")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	b.SetCredential("anthropic", "sk-ant-api03-trailer")
	b.SetCredential("fountain", "fountain-key-trailer")
	b.SetSecret("a", "ECHO", hs.URL, "egress_value_trailer_0123456789")
	b.Report(box, brokertest.Entry("inference", "agent"), brokertest.Entry("fountain", "agent", "conversations"), brokertest.Entry("egress", "ECHO"))
	tests := []struct {
		name, path, auth, body string
		up                     *trailerSeen
		status                 int
	}{
		{"inference", "/llm/anthropic/v1/messages", "X-Api-Key: " + box,
			`{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, anthropic, 200},
		{"count_tokens", "/llm/anthropic/v1/messages/count_tokens", "X-Api-Key: " + box,
			`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, anthropic, 200},
		{"fountain", "/fountain/api/conversations", "Authorization: Bearer " + box, `{"agent":"x"}`, fountain, 201},
		{"egress", "/egress/ECHO/v1/x", "Authorization: Bearer " + box, `{"a":1}`, host, 204},
	}
	for _, tt := range tests {
		for _, leak := range []string{other, grant} {
			t.Run(tt.name, func(t *testing.T) {
				before := len(tt.up.all())
				if status := sendChunked(t, b, "POST", tt.path, tt.auth, tt.body, leak); status != tt.status {
					t.Fatalf("POST %s with a trailer = %d, want %d", tt.path, status, tt.status)
				}
				seen := tt.up.all()
				if len(seen) != before+1 {
					t.Fatalf("the upstream received %d requests, want 1", len(seen)-before)
				}
				got := seen[len(seen)-1]
				if strings.Contains(got, leak) || strings.Contains(got, "X-Leak") {
					t.Errorf("the upstream received the trailer:\n%s", got)
				}
			})
		}
	}
}

// trailerProbe is a capability that forwards nothing: it reads the body
// it is handed and records the trailer fields it then sees.
type trailerProbe struct {
	mu   sync.Mutex // guards seen
	seen []http.Header
}

func (p *trailerProbe) Name() string       { return "probe" }
func (p *trailerProbe) Prefixes() []string { return []string{"/probe"} }
func (p *trailerProbe) Routes() []capability.Route {
	return capability.Under("/probe", capability.StandardMethods, "")
}
func (p *trailerProbe) Scopes(r *http.Request) (capability.Need, bool, error) {
	return capability.Need{Words: []string{"agent"}}, true, nil
}

func (p *trailerProbe) Serve(w http.ResponseWriter, r *http.Request, c *capability.Call) error {
	_, _ = io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	p.seen = append(p.seen, r.Trailer.Clone())
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// TestBroker_RequestTrailerNeverReachesACapability sends another box's
// token in a chunked request's trailer to a capability that forwards
// nothing through the proxy package: the broker itself drops the trailer,
// so no capability, whatever it does with the request, can see or pass it on.
func TestBroker_RequestTrailerNeverReachesACapability(t *testing.T) {
	probe := &trailerProbe{}
	b := brokertest.New(t, brokertest.Options{Extra: []capability.Capability{probe}})
	box := b.AddBox("a")
	other := b.AddBox("b")
	b.Report(box, brokertest.Entry("probe", "agent"))
	if status := sendChunked(t, b, "POST", "/probe/x", "Authorization: Bearer "+box, `{"a":1}`, other); status != http.StatusNoContent {
		t.Fatalf("POST /probe/x with a trailer = %d, want 204", status)
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if len(probe.seen) != 1 {
		t.Fatalf("the capability served %d requests, want 1", len(probe.seen))
	}
	if len(probe.seen[0]) != 0 {
		t.Errorf("the capability saw the trailer %v, want none", probe.seen[0])
	}
}
