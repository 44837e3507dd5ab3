package broker_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/token"
)

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bodySeen is an egress host that keeps the Content-Encoding, the length
// and the body of every request it receives.
type bodySeen struct {
	mu   sync.Mutex // guards seen
	seen []string
}

func (h *bodySeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// A body the broker cut (one that decodes past the bound goes
		// on as it decodes, and stops there): the host never has it
		// whole, so it is not a request received.
		return
	}
	h.mu.Lock()
	h.seen = append(h.seen, fmt.Sprintf("encoding=%q length=%d\n%s", r.Header.Values("Content-Encoding"), r.ContentLength, body))
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *bodySeen) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// TestBroker_EncodedBodyIsRefusedWhereNotDecoded sends a gzip body that
// holds another box's token and a grant to every route that reads no
// encoded body (inference, decide, feedback, Fountain): each is a 415 in
// the refusal's shape, and no upstream receives anything, so no upstream
// that decodes bodies finds a token the broker's scan could not read.
func TestBroker_EncodedBodyIsRefusedWhereNotDecoded(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Fountain: true})
	box := b.AddBox("a")
	other := b.AddBox("b")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	b.SetCredential("anthropic", "sk-ant-api03-encoded")
	b.SetCredential("fountain", "fountain-key-encoded")
	b.Report(box, brokertest.Entry("inference", "agent", "decide"), brokertest.Entry("fountain", "agent", "conversations"),
		brokertest.Entry("feedback", "agent", "passive"))
	consent(t, b, "a")
	body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"` + other + ` ` + grant + `"}],"entries":[{"n":"` + other + `"}]}`
	zipped := gzipped(t, body)
	routes := []string{"/llm/anthropic/v1/messages", "/llm/anthropic/v1/messages/count_tokens", protocol.RouteDecide,
		protocol.RouteFeedback, "/fountain/api/conversations", "/fountain/api/conversations/c1/messages"}
	encodings := []struct {
		name   string
		header []string
	}{
		{"gzip", []string{"gzip"}},
		{"deflate", []string{"deflate"}},
		{"identity then gzip", []string{"identity", "gzip"}},
		{"stacked", []string{"identity, gzip"}},
	}
	for _, path := range routes {
		for _, enc := range encodings {
			t.Run(path+"/"+enc.name, func(t *testing.T) {
				resp := b.Do("POST", path, box, zipped, http.Header{"Content-Encoding": enc.header, "Content-Type": {"application/json"}})
				if resp.StatusCode != http.StatusUnsupportedMediaType {
					t.Fatalf("POST %s, Content-Encoding %q = %d %s, want 415", path, enc.header, resp.StatusCode, resp.Body)
				}
				if typ, msg := brokertest.Refusal(resp.Body); typ != protocol.TypeInvalid || !strings.Contains(msg, "Content-Encoding") {
					t.Errorf("415 body = %s, want an invalid_request_error naming Content-Encoding", resp.Body)
				}
			})
		}
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("the Anthropic API received %d requests, want none", n)
	}
	if n := len(b.Fountain.Seen()); n != 0 {
		t.Errorf("Fountain received %d requests, want none", n)
	}
	// A body named identity is a body as it is.
	resp := b.Do("POST", "/llm/anthropic/v1/messages/count_tokens", box, []byte(`{"model":"claude-sonnet-4-5","messages":[]}`),
		http.Header{"Content-Encoding": {"identity"}, "Content-Type": {"application/json"}})
	if resp.StatusCode != 200 {
		t.Errorf("count_tokens with Content-Encoding: identity = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}

// consent records the consent of box name's owner to its feedback.
func consent(t *testing.T, b *brokertest.Broker, name string) {
	t.Helper()
	box, err := b.Server.Store.Box(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	box.Consent = true
	if err := b.Server.Store.UpdateBox(t.Context(), box); err != nil {
		t.Fatal(err)
	}
	b.Sync()
}

// TestBroker_EncodedBodyIsDecodedForEgress: egress takes gzip bodies (git
// sends them), so the broker decodes one before egress swaps the box's
// token for the value in a field the secret names (and marks it anywhere
// else) and replaces any other token: the host
// receives the body decoded, with no Content-Encoding and no token, and
// its length when it is small. A body that is not gzip, or is in another
// coding, is refused and reaches no host; one that decodes past the bound
// is refused too, and the host, which may have had its start, never has
// it whole.
func TestBroker_EncodedBodyIsDecodedForEgress(t *testing.T) {
	host := &bodySeen{}
	hs := httptest.NewServer(host)
	t.Cleanup(hs.Close)
	const maxBody = 4 << 20
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.EgressMaxBody = maxBody }})
	box := b.AddBox("a")
	other := b.AddBox("b")
	const value = "egress_value_encoded_0123456789"
	b.SetSecret("a", "ECHO", hs.URL, value, "key")
	b.Report(box, brokertest.Entry("egress", "ECHO"))
	body := `{"key":"` + box + `","other":"` + other + `"}`
	resp := b.Do("POST", "/egress/ECHO/v1/x", box, gzipped(t, body), http.Header{"Content-Encoding": {"gzip"}, "Content-Type": {"application/json"}})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a gzip body = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	seen := host.all()
	if len(seen) != 1 {
		t.Fatalf("the host received %d requests, want 1", len(seen))
	}
	want := `{"key":"` + value + `","other":"` + proxy.TokenMarker(len(other)) + `"}`
	if got := seen[0]; got != fmt.Sprintf("encoding=[] length=%d\n%s", len(want), want) {
		t.Errorf("the host received:\n%s\nwant the body decoded, %d bytes long:\n%s", got, len(want), want)
	}

	// A body that decodes to more than a megabyte goes on as it decodes,
	// the token marked.
	big := strings.Repeat("x", 3<<20) + box
	resp = b.Do("PUT", "/egress/ECHO/v1/big", box, gzipped(t, big), http.Header{"Content-Encoding": {"x-gzip"}})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a large gzip body = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	seen = host.all()
	if got := seen[len(seen)-1]; !strings.HasPrefix(got, "encoding=[] length=-1\n") || !strings.HasSuffix(got, strings.Repeat("x", 100)+proxy.TokenMarker(len(box))) {
		t.Errorf("the host received a large body of %d bytes, want it decoded with a marker at its end", len(got))
	}

	tests := []struct {
		name   string
		header []string
		body   []byte
		status int
	}{
		{"over the bound decoded", []string{"gzip"}, gzipped(t, strings.Repeat("0", maxBody+1)), http.StatusRequestEntityTooLarge},
		{"not gzip", []string{"gzip"}, []byte(body), http.StatusBadRequest},
		{"brotli", []string{"br"}, []byte(body), http.StatusUnsupportedMediaType},
		{"stacked", []string{"gzip, gzip"}, gzipped(t, string(gzipped(t, body))), http.StatusUnsupportedMediaType},
		{"two headers", []string{"identity", "gzip"}, gzipped(t, body), http.StatusUnsupportedMediaType},
	}
	before := len(host.all())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Do("POST", "/egress/ECHO/v1/x", box, tt.body, http.Header{"Content-Encoding": tt.header})
			if resp.StatusCode != tt.status {
				t.Errorf("POST, Content-Encoding %q = %d %s, want %d", tt.header, resp.StatusCode, resp.Body, tt.status)
			}
			if typ, _ := brokertest.Refusal(resp.Body); typ == "" {
				t.Errorf("not a refusal: %s", resp.Body)
			}
		})
	}
	if n := len(host.all()) - before; n != 0 {
		t.Errorf("the host received %d refused requests, want none", n)
	}
}

// TestBroker_HeadIsJudgedInOrder sends requests that fail more than one
// of the judgments made of a request's head, with no token: each is
// refused for the first of them (the prefix, the route, the method, the
// body's coding) and only then for its token, so that a 404, a 405 or a
// 415 is given before the box is known.
func TestBroker_HeadIsJudgedInOrder(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	br := http.Header{"Content-Encoding": {"br"}, "Content-Type": {"application/json"}}
	tests := []struct {
		name, method, path string
		header             http.Header
		want               int
	}{
		{"no prefix", "DELETE", "/nowhere", br, http.StatusNotFound},
		{"no route", "DELETE", protocol.PrefixAnthropic + "/v1/nothing", br, http.StatusNotFound},
		{"a method the route does not take", "DELETE", protocol.PrefixAnthropic + "/v1/messages", br, http.StatusMethodNotAllowed},
		{"a coding the route does not take", "POST", protocol.PrefixAnthropic + "/v1/messages", br, http.StatusUnsupportedMediaType},
		{"no token", "POST", protocol.PrefixAnthropic + "/v1/messages", nil, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Do(tt.method, tt.path, "", []byte(`{"model":"m"}`), tt.header)
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, resp.Body, tt.want)
			}
			if allow := resp.Header.Get("Allow"); (tt.want == http.StatusMethodNotAllowed) != (allow != "") {
				t.Errorf("%s %s: Allow %q with a %d", tt.method, tt.path, allow, resp.StatusCode)
			}
		})
	}
}
