package inference_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

const apiKey = "sk-ant-api03-TESTCREDENTIAL-0123456789"

func TestForwards_CredentialInPlaceOfToken(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	tests := []struct {
		name   string
		header http.Header
	}{
		{"x-api-key", http.Header{"X-Api-Key": {token}}},
		{"bearer", http.Header{"Authorization": {"Bearer " + token}}},
		{"both, the same", http.Header{"X-Api-Key": {token}, "Authorization": {"Bearer " + token}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header.Clone()
			h.Set("Anthropic-Version", "2023-06-01")
			h.Set("Anthropic-Beta", "prompt-caching-2024-07-31")
			h.Set("X-Stainless-Lang", "go")
			h.Set("Cookie", "session=box")
			h.Set("Chant-Grant", "g_unknown")
			before := len(b.Upstream.Seen())
			resp := b.Do("POST", "/llm/anthropic/v1/messages?beta=true", "", body, h)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			if got := resp.Header.Get("Chant-Payer"); got != "shared" {
				t.Errorf("chant-payer = %q, want shared", got)
			}
			seen := b.Upstream.Seen()[before:]
			if len(seen) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(seen))
			}
			s := seen[0]
			if s.Path != "/v1/messages" || s.RawQuery != "beta=true" || !bytes.Equal(s.Body, body) {
				t.Errorf("upstream got %s?%s %s", s.Path, s.RawQuery, s.Body)
			}
			if s.Header.Get("X-Api-Key") != apiKey || s.Header.Get("Authorization") != "" {
				t.Errorf("upstream credential headers: x-api-key %q authorization %q", s.Header.Get("X-Api-Key"), s.Header.Get("Authorization"))
			}
			for _, k := range []string{"Anthropic-Version", "Anthropic-Beta", "X-Stainless-Lang"} {
				if s.Header.Get(k) != h.Get(k) {
					t.Errorf("upstream %s = %q, want %q", k, s.Header.Get(k), h.Get(k))
				}
			}
			for _, k := range []string{"Cookie", "Chant-Grant"} {
				if s.Header.Get(k) != "" {
					t.Errorf("upstream received %s", k)
				}
			}
			assertNoToken(t, s, token)
		})
	}
}

func assertNoToken(t *testing.T, s brokertest.Seen, token string) {
	t.Helper()
	var all bytes.Buffer
	s.Header.Write(&all)
	all.WriteString(s.Path + "?" + s.RawQuery)
	all.Write(s.Body)
	if bytes.Contains(all.Bytes(), []byte(token)) {
		t.Errorf("upstream received the box's token")
	}
}

// TestForwards_ClientCannotStripCredential sends hop-by-hop tricks that
// would remove an injected header if the proxy used Director.
func TestForwards_ClientCannotStripCredential(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	h := http.Header{"X-Api-Key": {token}, "Connection": {"X-Api-Key, Authorization"}}
	resp := b.Do("POST", "/llm/anthropic/v1/messages", "", []byte(`{"model":"m"}`), h)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	s := b.Upstream.Seen()[0]
	if s.Header.Get("X-Api-Key") != apiKey {
		t.Errorf("upstream x-api-key = %q, want the credential", s.Header.Get("X-Api-Key"))
	}
}

func TestForwards_SetupTokenAsBearerWithBeta(t *testing.T) {
	const setup = "sk-ant-oat01-TESTSETUPTOKEN"
	tests := []struct {
		name, beta, want string
	}{
		{"no beta sent", "", proxy.OAuthBeta},
		{"a beta sent", "prompt-caching-2024-07-31", "prompt-caching-2024-07-31," + proxy.OAuthBeta},
		{"the beta sent already", proxy.OAuthBeta, proxy.OAuthBeta},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := brokertest.New(t, brokertest.Options{})
			token := b.AddBox("a")
			b.SetCredential("anthropic", setup)
			b.Report(token, brokertest.Entry("inference", "agent"))
			h := http.Header{"X-Api-Key": {token}}
			if tt.beta != "" {
				h.Set("Anthropic-Beta", tt.beta)
			}
			resp := b.Do("POST", "/llm/anthropic/v1/messages/count_tokens", "", []byte(`{}`), h)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			s := b.Upstream.Seen()[0]
			if s.Header.Get("Authorization") != "Bearer "+setup || s.Header.Get("X-Api-Key") != "" {
				t.Errorf("upstream auth = %q / x-api-key %q", s.Header.Get("Authorization"), s.Header.Get("X-Api-Key"))
			}
			if got := strings.Join(s.Header.Values("Anthropic-Beta"), ","); got != tt.want {
				t.Errorf("anthropic-beta = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRefusals_AreForbiddenAndReachNoUpstream(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	other := b.AddBox("b")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "decide"))
	tests := []struct {
		name, method, path string
		header             http.Header
		status             int
		words              []string
	}{
		{"without agent", "POST", "/llm/anthropic/v1/messages", http.Header{"X-Api-Key": {token}}, 403, []string{"inference", "agent"}},
		{"never reported", "POST", "/llm/anthropic/v1/messages", http.Header{"X-Api-Key": {other}}, 403, []string{"no declaration"}},
		{"unknown token", "POST", "/llm/anthropic/v1/messages", http.Header{"X-Api-Key": {"bbx_nobody"}}, 403, nil},
		{"no token", "GET", "/llm/anthropic/v1/models", nil, 403, nil},
		{"two tokens", "GET", "/llm/anthropic/v1/models", http.Header{"X-Api-Key": {token}, "Authorization": {"Bearer " + other}}, 403, nil},
		{"unknown route", "POST", "/llm/anthropic/v1/complete", http.Header{"X-Api-Key": {token}}, 404, nil},
		{"batches", "POST", "/llm/anthropic/v1/messages/batches", http.Header{"X-Api-Key": {token}}, 404, nil},
		{"no capability", "GET", "/nothing", nil, 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.method == http.MethodPost {
				body = []byte(`{}`)
			}
			resp := b.Do(tt.method, tt.path, "", body, tt.header)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			typ, msg := brokertest.Refusal(resp.Body)
			if typ == "" || msg == "" {
				t.Fatalf("body is not a refusal: %s", resp.Body)
			}
			for _, w := range tt.words {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not name %q", msg, w)
				}
			}
		})
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("upstream received %d requests, want 0", n)
	}
}

func TestHello_NeedsNoToken(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	for _, m := range []string{"HEAD", "GET"} {
		resp := b.Do(m, "/llm/anthropic/api/hello", "", nil, nil)
		if resp.StatusCode != 200 {
			t.Errorf("%s hello = %d, want 200", m, resp.StatusCode)
		}
	}
	if resp := b.Do("POST", "/llm/anthropic/api/hello", "", nil, nil); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST hello = %d Allow %q, want 405 Allow GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestNoCredential_IsAForbiddenWithAHint(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.Report(token, brokertest.Entry("inference", "agent"))
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{}`), nil)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(msg, "credential set anthropic") {
		t.Errorf("got %d %q", resp.StatusCode, msg)
	}
}

// TestStream_FirstEventBeforeUpstreamFinishes holds the upstream's stream
// open after its first event until the client has read that event: a
// broker that buffered the answer would never deliver it.
func TestStream_FirstEventBeforeUpstreamFinishes(t *testing.T) {
	release := make(chan struct{})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		events := brokertest.SSEEvents("m", "streamed")
		io.WriteString(w, events[0])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			return // the test has failed by now; end the stream
		}
		for _, ev := range events[1:] {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: upstream})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", strings.NewReader(`{"model":"m","stream":true}`))
	req.Header.Set("X-Api-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get(protocol.HeaderPayer) != "shared" {
		t.Errorf("headers: %v", resp.Header)
	}
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if err != nil || first != "event: message_start\n" {
		t.Fatalf("first line = %q, %v", first, err)
	}
	close(release)
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), "event: ping") || !strings.HasSuffix(string(rest), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("rest of stream = %q", rest)
	}
}

func TestCredentialRepeatedByUpstream_IsNotAnswered(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Debug-Key", r.Header.Get("X-Api-Key"))
		w.Write([]byte(`{}`))
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: upstream})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil)
	var all bytes.Buffer
	resp.Header.Write(&all)
	if strings.Contains(all.String(), apiKey) {
		t.Errorf("answer headers carry the credential: %v", resp.Header)
	}
}
