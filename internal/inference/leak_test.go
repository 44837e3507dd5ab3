package inference_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/token"
)

// reaches reports where s, as the upstream would read it, holds secret:
// its headers, its path, its query decoded, its body as is and its body
// decoded as JSON.
func reaches(s brokertest.Seen, secret string) []string {
	var where []string
	var h bytes.Buffer
	_ = s.Header.Write(&h)
	if strings.Contains(h.String(), secret) {
		where = append(where, "a header")
	}
	if strings.Contains(s.Path, secret) {
		where = append(where, "the path")
	}
	if q, err := url.QueryUnescape(s.RawQuery); strings.Contains(s.RawQuery, secret) || err == nil && strings.Contains(q, secret) {
		where = append(where, "the query")
	}
	if bytes.Contains(s.Body, []byte(secret)) {
		where = append(where, "the body")
	}
	var v any
	if json.Unmarshal(s.Body, &v) == nil {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		if strings.Contains(b.String(), secret) {
			where = append(where, "the body, JSON-decoded")
		}
	}
	return where
}

// jsonEscape writes every character of s as \u00XX.
func jsonEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

func newLeakBroker(t *testing.T) (*brokertest.Broker, string) {
	t.Helper()
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	return b, token
}

func TestInference_TokenInQueryNeverReachesUpstream(t *testing.T) {
	b, token := newLeakBroker(t)
	tests := []struct {
		name, query string
	}{
		{"key", "key=" + token},
		{"percent-escaped", "key=" + url.QueryEscape(token) + "&x=%62%62x%5f" + token[4:]},
		{"beside others", "beta=true&k=" + token + "&z=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(b.Upstream.Seen())
			resp := b.Do("POST", "/llm/anthropic/v1/messages?"+tt.query, token, []byte(`{"model":"m","max_tokens":5,"messages":[]}`), nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			for _, s := range b.Upstream.Seen()[before:] {
				if where := reaches(s, token); where != nil {
					t.Errorf("the upstream received the box's token in %s (query %q)", strings.Join(where, ", "), s.RawQuery)
				}
			}
		})
	}
}

func TestInference_TokenInHeadersNeverReachesUpstream(t *testing.T) {
	b, token := newLeakBroker(t)
	h := http.Header{
		"X-Goog-Api-Key": {token},
		"Referer":        {"https://box.example/?key=" + token},
		"X-Custom":       {"a " + token + " b"},
		"X-Escaped":      {"bbx%5F" + token[4:]},
	}
	before := len(b.Upstream.Seen())
	resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, h)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	seen := b.Upstream.Seen()[before:]
	if len(seen) != 1 {
		t.Fatalf("the upstream saw %d requests, want 1", len(seen))
	}
	if where := reaches(seen[0], token); where != nil {
		t.Errorf("the upstream received the box's token in %s", strings.Join(where, ", "))
	}
	if got := seen[0].Header.Get("X-Escaped"); strings.Contains(got, token[4:]) {
		t.Errorf("X-Escaped = %q, want the token replaced", got)
	}
}

func TestInference_TokenInPathNeverReachesUpstream(t *testing.T) {
	b, token := newLeakBroker(t)
	before := len(b.Upstream.Seen())
	b.Do("GET", "/llm/anthropic/v1/models/"+token, token, nil, nil)
	for _, s := range b.Upstream.Seen()[before:] {
		if where := reaches(s, token); where != nil {
			t.Errorf("the upstream received the box's token in %s", strings.Join(where, ", "))
		}
	}
}

func TestInference_TokenInBodyNeverReachesUpstream(t *testing.T) {
	b, tok := newLeakBroker(t)
	grant, err := token.NewGrant() // shaped as one; the broker need not have issued it
	if err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("All work and no play. ", 10000) // the token lands past the first reads
	tests := []struct {
		name, text string
	}{
		{"plain", tok},
		{"json-escaped underscore", strings.Replace(tok, "_", `\u005f`, 1)},
		{"every character escaped", jsonEscape(tok)},
		{"split by the filler", filler + tok + filler},
		{"a grant", grant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"my key is ` + tt.text + `"}]}`)
			before := len(b.Upstream.Seen())
			resp := b.Do("POST", "/llm/anthropic/v1/messages", tok, body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			seen := b.Upstream.Seen()[before:]
			if len(seen) != 1 {
				t.Fatalf("the upstream saw %d requests, want 1", len(seen))
			}
			for _, secret := range []string{tok, grant} {
				if where := reaches(seen[0], secret); where != nil {
					t.Errorf("the upstream received a token in %s", strings.Join(where, ", "))
				}
			}
			if len(seen[0].Body) != len(body) {
				t.Errorf("the upstream received %d bytes, want the body's %d", len(seen[0].Body), len(body))
			}
			if !json.Valid(seen[0].Body) {
				t.Errorf("the upstream received a body that is no longer JSON")
			}
		})
	}
}

// TestInference_HTMLOrTwiceEscapedTokenInBodyNeverReachesUpstream: a
// box writes its token in a Messages body as HTML character references
// (which a model, or an HTML reader upstream, reads back), or escaped
// twice (a JSON document or an HTML page quoted in the text, a URL in a
// URL). The upstream receives none of them, by any of those decodings.
func TestInference_HTMLOrTwiceEscapedTokenInBodyNeverReachesUpstream(t *testing.T) {
	b, tok := newLeakBroker(t)
	refs := func(format string) string {
		var s strings.Builder
		for i := 0; i < len(tok); i++ {
			fmt.Fprintf(&s, format, tok[i])
		}
		return s.String()
	}
	for name, text := range map[string]string{
		"decimal references":   refs("&#%d;"),
		"hex references":       refs("&#x%x;"),
		"referenced separator": strings.Replace(tok, "_", "&#95;", 1),
		"json in json":         strings.ReplaceAll(jsonEscape(tok), `\u`, `\\u`),
		"html in json":         strings.ReplaceAll(refs("&#%d;"), "&", `\u0026`),
		"html escaped twice":   strings.ReplaceAll(refs("&#x%x;"), "&", "&amp;"),
		"url in a url":         strings.ReplaceAll(refs("%%%02x"), "%", "%25"),
	} {
		t.Run(name, func(t *testing.T) {
			body := []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"my key is ` + text + `"}]}`)
			before := len(b.Upstream.Seen())
			resp := b.Do("POST", "/llm/anthropic/v1/messages", tok, body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			seen := b.Upstream.Seen()[before:]
			if len(seen) != 1 {
				t.Fatalf("the upstream saw %d requests, want 1", len(seen))
			}
			var m struct {
				Messages []struct{ Content string }
			}
			if err := json.Unmarshal(seen[0].Body, &m); err != nil || len(m.Messages) != 1 {
				t.Fatalf("the upstream received a body that is no longer the request's JSON: %v", err)
			}
			once := m.Messages[0].Content
			var inner string
			_ = json.Unmarshal([]byte(`"`+once+`"`), &inner)
			unescaped, _ := url.QueryUnescape(once)
			twice, _ := url.QueryUnescape(unescaped)
			for how, s := range map[string]string{
				"as sent": string(seen[0].Body), "JSON-decoded": once, "as HTML": html.UnescapeString(once),
				"as HTML twice": html.UnescapeString(html.UnescapeString(once)), "as JSON twice": inner,
				"as HTML in JSON": html.UnescapeString(inner), "URL-decoded twice": twice,
			} {
				if strings.Contains(s, tok) {
					t.Errorf("the upstream received the token, read %s", how)
				}
			}
			if len(seen[0].Body) != len(body) {
				t.Errorf("the upstream received %d bytes, want the body's %d", len(seen[0].Body), len(body))
			}
		})
	}
}

// TestInference_EscapedCredentialInTheAnswerIsMasked: an upstream (a
// gateway the operator points --anthropic-url at) that repeats the
// credential JSON-escaped in its answer's body, which the box's JSON
// decoder turns back into the credential, or percent-escaped in a
// header, hands it to no box.
func TestInference_EscapedCredentialInTheAnswerIsMasked(t *testing.T) {
	pct := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
		return b.String()
	}
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, key string)
	}{
		{"JSON-escaped in the body", func(w http.ResponseWriter, key string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"error":{"message":"key %s"}}`, jsonEscape(key))
		}},
		{"one character JSON-escaped in the body", func(w http.ResponseWriter, key string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"error":{"message":"key %s"}}`, strings.Replace(key, "-", `\u002d`, 1))
		}},
		{"JSON-escaped in an event", func(w http.ResponseWriter, key string) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: ping\ndata: {\"k\":\"%s\"}\n\n", jsonEscape(key))
		}},
		{"in a header's name", func(w http.ResponseWriter, key string) {
			w.Header().Set("X-"+key, "1")
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
		}},
		{"percent-escaped in a header", func(w http.ResponseWriter, key string) {
			w.Header().Set("Location", "https://example.com/?k="+pct(key))
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tt.answer(w, r.Header.Get("X-Api-Key")) })
			b := brokertest.New(t, brokertest.Options{Anthropic: up})
			token := b.AddBox("a")
			b.SetCredential("anthropic", apiKey)
			b.Report(token, brokertest.Entry("inference", "agent"))
			resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"m","max_tokens":5,"messages":[]}`), nil)
			var h bytes.Buffer
			_ = resp.Header.Write(&h)
			seen := unescapeAll(string(resp.Body) + "\n" + h.String())
			if strings.Contains(strings.ToLower(seen), strings.ToLower(apiKey)) {
				t.Errorf("the answer carries the credential: %d %s %v", resp.StatusCode, resp.Body, resp.Header)
			}
		})
	}
}

var escapeRE = regexp.MustCompile(`\\u[0-9a-fA-F]{4}|%[0-9a-fA-F]{2}`)

// unescapeAll is s with every JSON escape \uXXXX and percent-escape %XX
// in it decoded, as a box's JSON decoder or URL parser would.
func unescapeAll(s string) string {
	return escapeRE.ReplaceAllStringFunc(s, func(e string) string {
		n, _ := strconv.ParseUint(strings.TrimLeft(e, `\u%`), 16, 32)
		return string(rune(n))
	})
}

// TestInference_PathCannotLeaveTheRoutes: a models path whose id, as the
// upstream would read it, is a dot segment, a slash or an absolute URL,
// however the box escapes it, reaches no upstream.
func TestInference_PathCannotLeaveTheRoutes(t *testing.T) {
	b, token := newLeakBroker(t)
	paths := []string{
		"/llm/anthropic/v1/models/..",
		"/llm/anthropic/v1/models/%2e%2e",
		"/llm/anthropic/v1/models/.%2E",
		"/llm/anthropic/v1/models/%2e",
		"/llm/anthropic/v1/models/x%2F..%2F..%2Fv1%2Fmessages",
		"/llm/anthropic/v1/models/%2F%2Fevil.example",
		"/llm/anthropic/v1/models/x%5C..%5C..",
		"/llm/anthropic/v1/models//evil.example",
		"/llm/anthropic//v1/models",
		"/llm/anthropic/v1/models/http:%2F%2Fevil.example",
		"/llm/anthropic/v1/messages/../models",
		"/llm/anthropic/v1/messages%2F..%2Fcount_tokens",
		"/llm/anthropic/v1/models/%252e%252e",
		"/llm/anthropic/v1/models/..;",
		"/llm/anthropic/v1/models/x%00",
	}
	for _, p := range paths {
		before := len(b.Upstream.Seen())
		resp := b.Do("GET", p, token, nil, nil)
		if resp.StatusCode < 300 {
			t.Errorf("GET %s = %d, want it refused", p, resp.StatusCode)
		}
		if seen := b.Upstream.Seen()[before:]; len(seen) != 0 {
			t.Errorf("GET %s reached the upstream at %s", p, seen[0].Path)
		}
	}
	for _, id := range []string{"claude-sonnet-4-5-20250929", "anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet@20240620"} {
		if resp := b.Do("GET", "/llm/anthropic/v1/models/"+id, token, nil, nil); resp.StatusCode != 200 {
			t.Errorf("GET /v1/models/%s = %d, want it forwarded", id, resp.StatusCode)
		}
	}
}

// TestInference_TokenInBetaOrRepeatedHeadersNeverReachesUpstream: the
// token as one of several anthropic-beta values, as the second value of
// a repeated header, as a header's name, or in metadata.user_id
// JSON-escaped, reaches no upstream.
func TestInference_TokenInBetaOrRepeatedHeadersNeverReachesUpstream(t *testing.T) {
	b, token := newLeakBroker(t)
	h := http.Header{
		"Anthropic-Beta":    {"context-1m-2025-08-07", "x," + token},
		"X-Repeated":        {"a", token},
		"X-" + token:        {"1"},
		"Anthropic-Version": {"2023-06-01"},
	}
	body := []byte(`{"model":"m","max_tokens":5,"metadata":{"user_id":"` + jsonEscape(token) + `"},"messages":[]}`)
	before := len(b.Upstream.Seen())
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, body, h)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	for _, s := range b.Upstream.Seen()[before:] {
		var hb bytes.Buffer
		_ = s.Header.Write(&hb)
		if w := reaches(s, token); len(w) > 0 || strings.Contains(strings.ToLower(hb.String()), strings.ToLower(token)) {
			t.Errorf("the token reached the upstream in %v: %s", w, hb.String())
		}
		if !strings.Contains(hb.String(), "context-1m-2025-08-07") {
			t.Errorf("the box's other anthropic-beta did not reach the upstream: %v", s.Header)
		}
	}
}

// TestInference_HostAndAbsoluteURLCannotChangeTheUpstream: a request
// whose Host header, or whose request line's absolute URL, names another
// host reaches the configured upstream alone, under its own host name.
func TestInference_HostAndAbsoluteURLCannotChangeTheUpstream(t *testing.T) {
	hosts := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer up.Close()
	upURL, _ := url.Parse(up.URL)
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.AnthropicURL = upURL }})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	brokerHost := strings.TrimPrefix(b.URL, "http://")
	for _, line := range []string{
		"GET /llm/anthropic/v1/models HTTP/1.1\r\nHost: evil.example\r\n",
		"GET http://evil.example/llm/anthropic/v1/models HTTP/1.1\r\nHost: evil.example\r\n",
		"GET http://evil.example:80/llm/anthropic/v1/models HTTP/1.1\r\nHost: " + brokerHost + "\r\n",
	} {
		c, err := net.Dial("tcp", brokerHost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%sx-api-key: %s\r\nConnection: close\r\n\r\n", line, token)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%q = %d, want it forwarded to the configured upstream", line, resp.StatusCode)
			continue
		}
		if got := <-hosts; got != upURL.Host {
			t.Errorf("%q reached the upstream with Host %q, want %q", line, got, upURL.Host)
		}
	}
}
