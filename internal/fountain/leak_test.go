package fountain_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/fountain"
	"github.com/intentius/boxbroker/internal/store"
)

// TestFountain_EchoedKeyIsRemoved: a Fountain endpoint that echoes the
// request's headers, in its answer's headers, a 103's headers, its body
// (split across writes) and its trailers, hands the box no key.
func TestFountain_EchoedKeyIsRemoved(t *testing.T) {
	br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("Link", "</x>; rel=preload; k="+auth)
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Trailer", "X-Echo-Trailer")
		w.Header().Set("X-Echo-Authorization", auth)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		half := len(auth) / 2
		_, _ = io.WriteString(w, `{"filler":"`+strings.Repeat("a", 40<<10)+`","headers":{"Authorization":"`+auth[:half])
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, auth[half:]+`"}}`)
		w.Header().Set("X-Echo-Trailer", auth)
	})})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	var (
		mu    sync.Mutex
		early []string
	)
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		for k, vs := range h {
			early = append(early, k+": "+strings.Join(vs, ","))
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", br.URL+"/fountain/api/conversations", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := br.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %.200s", resp.StatusCode, body)
	}
	if bytes.Contains(body, []byte(key)) {
		t.Errorf("the answer's body carries the operator's key")
	}
	if !bytes.Contains(body, []byte("[fountain key removed]")) {
		t.Errorf("the answer's body does not hold the key's marker: %.100s…", body[len(body)-100:])
	}
	for where, h := range map[string]http.Header{"header": resp.Header, "trailer": resp.Trailer} {
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, key) {
					t.Errorf("the answer's %s %s carries the operator's key", where, k)
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range early {
		if strings.Contains(e, key) {
			t.Errorf("a 1xx answer's header carries the operator's key: %s", e)
		}
	}
}

// TestFountain_TokenNeverReachesUpstream: a token in the query, a custom
// header, the body (JSON-escaped) or the path past the id reaches no
// Fountain.
func TestFountain_TokenNeverReachesUpstream(t *testing.T) {
	br := newBroker(t, brokertest.Options{})
	alpha := br.AddBox("alpha")
	br.Report(alpha, brokertest.Entry("fountain", every...))
	assign(t, br, "alpha", store.ResourceSandbox, "sb-alpha")
	escaped := strings.Replace(alpha, "_", `\u005f`, 1)
	tests := []struct {
		name, method, path string
		body               string
		header             http.Header
	}{
		{"query", "GET", "/fountain/api/sandboxes/sb-alpha?key=" + url.QueryEscape(alpha), "", nil},
		{"headers", "GET", "/fountain/api/sandboxes/sb-alpha", "", http.Header{"X-Goog-Api-Key": {alpha}, "Referer": {"http://x/?k=" + alpha}}},
		{"body", "POST", "/fountain/api/sandboxes/sb-alpha/exec", `{"cmd":"echo ` + alpha + `"}`, nil},
		{"body, JSON-escaped", "POST", "/fountain/api/conversations", `{"prompt":"` + escaped + `"}`, nil},
		{"path past the id", "GET", "/fountain/api/sandboxes/sb-alpha/files/" + alpha, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			resp := br.Do(tt.method, tt.path, alpha, []byte(tt.body), tt.header)
			if resp.StatusCode/100 != 2 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			seen := br.Fountain.Seen()[before:]
			if len(seen) != 1 {
				t.Fatalf("Fountain received %d requests, want 1", len(seen))
			}
			tokenFree(t, seen, alpha)
			var v any
			if json.Unmarshal(seen[0].Body, &v) == nil {
				b, _ := json.Marshal(v)
				if strings.Contains(string(b), alpha[4:]) {
					t.Errorf("Fountain received the token in the body, JSON-decoded")
				}
			}
			if q, _ := url.QueryUnescape(seen[0].RawQuery); strings.Contains(q, alpha) {
				t.Errorf("Fountain received the token in the query, decoded")
			}
			if len(seen[0].Body) != len(tt.body) {
				t.Errorf("Fountain received %d body bytes, want %d", len(seen[0].Body), len(tt.body))
			}
		})
	}
}

// TestFountain_TokenInIDIsNeverRecorded: a box that names its token as a
// Fountain id is refused, and neither the audit log nor the log holds the
// token.
func TestFountain_TokenInIDIsNeverRecorded(t *testing.T) {
	var logs bytes.Buffer
	br := newBroker(t, brokertest.Options{Logs: &lockedWriter{w: &logs}})
	alpha := br.AddBox("alpha")
	br.Report(alpha, brokertest.Entry("fountain", every...))
	for _, path := range []string{"/fountain/api/sandboxes/" + alpha, "/fountain/api/vaults/" + alpha + "/secrets", "/fountain/api/conversations?conversation_id=" + alpha} {
		if resp := br.Do("GET", path, alpha, nil, nil); resp.StatusCode != 403 {
			t.Errorf("GET %s = %d, want 403", path, resp.StatusCode)
		}
	}
	if err := br.Server.Audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := br.Admin("GET", "/api/audit?box=alpha", br.AdminToken, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("audit: %d %s", resp.StatusCode, resp.Body)
	}
	if !bytes.Contains(resp.Body, []byte("not this box's")) {
		t.Errorf("the audit log holds no refusal: %s", resp.Body)
	}
	if bytes.Contains(resp.Body, []byte(alpha[4:])) {
		t.Errorf("the audit log holds the box's token: %s", resp.Body)
	}
	if strings.Contains(logs.String(), alpha[4:]) {
		t.Errorf("the log holds the box's token")
	}
	if seen := br.Fountain.Seen(); len(seen) != 0 {
		t.Errorf("Fountain received %d requests, want none", len(seen))
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func ownershipBroker(t *testing.T, h http.Handler) (*brokertest.Broker, string) {
	t.Helper()
	br := newBroker(t, brokertest.Options{FountainHandler: h})
	alpha := br.AddBox("alpha")
	br.AddBox("beta")
	br.Report(alpha, brokertest.Entry("fountain", every...))
	assign(t, br, "beta", store.ResourceSandbox, "sb-b1")
	assign(t, br, "beta", store.ResourceVault, "v-b1")
	assign(t, br, "beta", store.ResourceConversation, "c-b1")
	assign(t, br, "alpha", store.ResourceSandbox, "sb-alpha")
	assign(t, br, "alpha", store.ResourceVault, "v-alpha")
	assign(t, br, "alpha", store.ResourceConversation, "c-alpha")
	return br, alpha
}

func TestFountain_IdInQueryMustBeTheBoxs(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	tests := []struct {
		name, path string
		want       int
	}{
		{"another box's sandbox", "/fountain/api/sandboxes?sandbox_id=sb-b1", 403},
		{"another box's conversation", "/fountain/api/conversations?conversation=c-b1", 403},
		{"another box's vault, camel case", "/fountain/api/vaults/v-alpha?vaultId=v-b1", 403},
		{"one of several", "/fountain/api/sandboxes?sandbox_id=sb-alpha&sandbox_id=sb-b1", 403},
		{"an id nobody recorded", "/fountain/api/sandboxes?sandboxIds=sb-nobody", 403},
		{"the box's own", "/fountain/api/sandboxes?sandbox_id=sb-alpha&vault=v-alpha", 200},
		{"not an id", "/fountain/api/sandboxes?limit=10&status=running", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			resp := br.Do("GET", tt.path, alpha, nil, nil)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("GET %s = %d %q, want %d", tt.path, resp.StatusCode, msg, tt.want)
			}
			reached := len(br.Fountain.Seen()) - before
			if tt.want == 403 && (reached != 0 || !strings.Contains(msg, "not this box's") || strings.Contains(msg, "beta")) {
				t.Errorf("GET %s: %q, Fountain received %d; want a refusal saying it is not this box's, naming no other box, reaching no Fountain", tt.path, msg, reached)
			}
		})
	}
}

func TestFountain_IdInBodyMustBeTheBoxs(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	tests := []struct {
		name, path, body string
		want             int
	}{
		{"another box's vault", "/fountain/api/conversations", `{"vault_id":"v-b1","prompt":"hi"}`, 403},
		{"another box's sandbox, as an object", "/fountain/api/conversations/c-alpha/messages", `{"sandbox":{"id":"sb-b1"}}`, 403},
		{"nested, in a list", "/fountain/api/conversations", `{"agent":{"config":{"sandbox_ids":["sb-alpha","sb-b1"]}}}`, 403},
		{"another box's conversation", "/fountain/api/sandboxes/sb-alpha/attach", `{"conversationId":"c-b1"}`, 403},
		{"a key written with escapes", "/fountain/api/conversations", `{"vault\u005fid":"v-b1"}`, 403},
		{"a member given twice", "/fountain/api/conversations", `{"vault_id":"v-b1","vault_id":"v-alpha"}`, 403},
		{"a form body", "/fountain/api/conversations", `sandbox_id=sb-b1`, 403},
		{"JSON this parser refuses", "/fountain/api/conversations", `{"vault_id":"v-b1",}`, 400},
		{"the box's own", "/fountain/api/conversations", `{"vault_id":"v-alpha","sandbox":{"id":"sb-alpha"},"prompt":"hi"}`, 201},
		{"other ids pass", "/fountain/api/conversations", `{"agent_id":"a1","id":"x"}`, 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			ct := "application/json"
			if !strings.HasPrefix(tt.body, "{") {
				ct = "application/x-www-form-urlencoded"
			}
			resp := br.Do("POST", tt.path, alpha, []byte(tt.body), http.Header{"Content-Type": {ct}})
			_, msg := brokertest.Refusal(resp.Body)
			want := tt.want
			if want == 201 && tt.path != "/fountain/api/conversations" {
				want = 200
			}
			if resp.StatusCode != want {
				t.Fatalf("POST %s %s = %d %q, want %d", tt.path, tt.body, resp.StatusCode, msg, want)
			}
			reached := len(br.Fountain.Seen()) - before
			if want == 400 && reached != 0 {
				t.Errorf("POST %s: Fountain received %d, want none", tt.path, reached)
			}
			if want == 403 && (reached != 0 || !strings.Contains(msg, "not this box's")) {
				t.Errorf("POST %s: %q, Fountain received %d; want a refusal saying it is not this box's, reaching no Fountain", tt.path, msg, reached)
			}
		})
	}
}

func TestFountain_ListingHoldsOnlyTheBoxsOwn(t *testing.T) {
	items := func(ids ...string) string {
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf(`{"id":%q,"name":"n-%s"}`, id, id))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	br, alpha := ownershipBroker(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/sandboxes":
			_, _ = io.WriteString(w, `{"data":`+items("sb-alpha", "sb-b1", "sb-op")+`,"has_more":false}`)
		case "/api/vaults":
			_, _ = io.WriteString(w, items("v-b1", "v-alpha"))
		case "/api/conversations":
			_, _ = io.WriteString(w, `{"page":{"items":`+items("c-b1")+`,"ids":["c-alpha","c-b1"]}}`)
		}
	}))
	tests := []struct {
		path, want string
	}{
		{"/fountain/api/sandboxes", `{"data":[{"id":"sb-alpha","name":"n-sb-alpha"}],"has_more":false}`},
		{"/fountain/api/vaults", `[{"id":"v-alpha","name":"n-v-alpha"}]`},
		{"/fountain/api/conversations", `{"page":{"ids":["c-alpha"],"items":[]}}`},
	}
	for _, tt := range tests {
		resp := br.Do("GET", tt.path, alpha, nil, nil)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s = %d %s, want 200", tt.path, resp.StatusCode, resp.Body)
			continue
		}
		var got, want any
		if err := json.Unmarshal(resp.Body, &got); err != nil {
			t.Errorf("GET %s: %v in %s", tt.path, err, resp.Body)
			continue
		}
		_ = json.Unmarshal([]byte(tt.want), &want)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("GET %s = %s, want %s", tt.path, g, w)
		}
	}
}

// TestFountain_EscapedKeyIsRemoved: a Fountain endpoint that echoes the
// request's Authorization escaped, as a JSON encoder that writes every
// byte as \u00XX or a URL encoder that escapes "_" would, in its headers
// and body, hands the box no key in any of those forms: Fountain's
// answers are searched as egress's are for a secret's value.
func TestFountain_EscapedKeyIsRemoved(t *testing.T) {
	jsonAll := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, `\u%04x`, s[i])
		}
		return b.String()
	}
	percent := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "_", "%5F") }
	br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo", percent(auth))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"authorization":"`+jsonAll(auth)+`","link":"/x?k=`+percent(auth)+`"}`)
	})})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	assign(t, br, "alpha", store.ResourceConversation, "c-alpha")
	resp := br.Do("GET", "/fountain/api/conversations/c-alpha", tok, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %.200s", resp.StatusCode, resp.Body)
	}
	seen := fmt.Sprint(resp.Header) + "\n" + string(resp.Body)
	for name, form := range map[string]string{"JSON \\u": jsonAll(key), "percent-escaped": percent(key)} {
		if strings.Contains(seen, form) {
			t.Errorf("the answer carries the operator's key %s: %s", name, seen)
		}
	}
	if strings.Count(seen, "[fountain key removed]") != 3 {
		t.Errorf("the answer holds the key's marker %d times, want 3 (a header, two in the body): %s", strings.Count(seen, "[fountain key removed]"), seen)
	}
}

// TestFountain_EncodedAnswerIsRefused: a Fountain endpoint answers gzip
// (the broker asked for no encoding) under a first Content-Encoding
// header of identity, or an empty one, so that a broker reading the first
// header alone would pass the body, key and all, to the box unread. Every
// answer whose Content-Encoding is not one identity is a 502 saying why.
func TestFountain_EncodedAnswerIsRefused(t *testing.T) {
	br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Encoding"] = r.URL.Query()["enc"]
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = io.WriteString(zw, `{"echo":"`+r.Header.Get("Authorization")+`"}`)
		_ = zw.Close()
		_, _ = w.Write(b.Bytes())
	})})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	assign(t, br, "alpha", store.ResourceConversation, "c-alpha")
	for _, tt := range []struct{ query, says string }{
		{"enc=identity&enc=gzip", `2 Content-Encoding headers`},
		{"enc=&enc=gzip", `2 Content-Encoding headers`},
		{"enc=identity,+gzip", "content encoding (gzip)"},
		{"enc=gzip", "content encoding (gzip)"},
	} {
		resp := br.Do("GET", "/fountain/api/conversations/c-alpha?"+tt.query, tok, nil, nil)
		_, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(msg, tt.says) {
			t.Errorf("Content-Encoding %s: answer %d %q, want 502 saying %q", tt.query, resp.StatusCode, resp.Body, tt.says)
		}
	}
}

// TestFountain_IdInAMultipartFormMustBeTheBoxs: the frameworks an API
// like Fountain's is written in read a form's fields from a
// multipart/form-data body as they do from an urlencoded one, and read a
// body holding JSON after a byte-order mark as JSON when no Content-Type
// says otherwise. Another box's id in either is refused as in any form
// or JSON body (in a part named as Rack or PHP may read it too: by its
// Content-ID, in single quotes), and a multipart form the broker cannot
// read whole (over 1 MiB, or malformed) is refused, not passed on unread.
func TestFountain_IdInAMultipartFormMustBeTheBoxs(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	form := func(fields [][2]string, file int) (string, []byte) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for _, f := range fields {
			_ = mw.WriteField(f[0], f[1])
		}
		if file > 0 {
			w, _ := mw.CreateFormFile("upload", "notes.txt")
			_, _ = w.Write(bytes.Repeat([]byte("x"), file))
		}
		_ = mw.Close()
		return mw.FormDataContentType(), b.Bytes()
	}
	tests := []struct {
		name string
		ct   string
		body []byte
		want int
	}{}
	add := func(name string, want int, ct string, body []byte) {
		tests = append(tests, struct {
			name string
			ct   string
			body []byte
			want int
		}{name, ct, body, want})
	}
	ct, body := form([][2]string{{"prompt", "hi"}, {"sandbox_id", "sb-b1"}}, 0)
	add("another box's sandbox in a multipart form", 403, ct, body)
	ct, body = form([][2]string{{"vaultIds", "v-alpha"}, {"vaultIds", "v-b1"}}, 10)
	add("one of several, beside a file", 403, ct, body)
	ct, body = form([][2]string{{"sandbox_id", "sb-b1"}}, fountain.MaxChecked)
	add("behind an upload past what the broker reads", 413, ct, body)
	ct, body = form([][2]string{{"sandbox_id", "sb-b1"}}, 0)
	add("a multipart form cut short", 400, ct, body[:len(body)-10])
	add("multipart/mixed, which Rack reads as a form", 403, strings.Replace(ct, "multipart/form-data", "multipart/mixed", 1), body)
	add("multipart/related, which Rack reads as a form", 403, strings.Replace(ct, "multipart/form-data", "Multipart/Related", 1), body)
	add("in a part Rack names by its Content-ID", 403, "multipart/form-data; boundary=b", []byte("--b\r\nContent-ID: sandbox_id\r\n\r\nsb-b1\r\n--b--\r\n"))
	add("in a part PHP names in single quotes", 403, "multipart/form-data; boundary=b", []byte("--b\r\nContent-Disposition: form-data; name='sandbox_id'\r\n\r\nsb-b1\r\n--b--\r\n"))
	add("JSON after a byte-order mark, with no Content-Type", 400, "", []byte("\xef\xbb\xbf"+`{"vault_id":"v-b1"}`))
	ct, body = form([][2]string{{"prompt", "hi"}, {"sandbox_id", "sb-alpha"}, {"vault", "v-alpha"}}, 10)
	add("the box's own", 201, ct, body)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			h := http.Header{}
			if tt.ct != "" {
				h.Set("Content-Type", tt.ct)
			}
			resp := br.Do("POST", "/fountain/api/conversations", alpha, tt.body, h)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("POST = %d %q, want %d", resp.StatusCode, msg, tt.want)
			}
			if reached := len(br.Fountain.Seen()) - before; tt.want != 201 && reached != 0 {
				t.Errorf("POST: Fountain received %d, want none", reached)
			}
			if tt.want == 403 && !strings.Contains(msg, "not this box's") {
				t.Errorf("POST: %q, want a refusal saying it is not this box's", msg)
			}
		})
	}
}

// TestFountain_QueryOrFormNotReadWholeIsRefused: Go's query parser drops a
// pair holding a ";" and gives up on a form with a bad escape, where
// other parsers split at ";" (Rack) or keep the escape as written: a
// query or form body the broker cannot read whole is a 400 reaching no
// Fountain, never one whose ids went unchecked.
func TestFountain_QueryOrFormNotReadWholeIsRefused(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"a query pair after a semicolon", "GET", "/fountain/api/sandboxes/sb-alpha?limit=1;vault_id=v-b1", "", 400},
		{"a query with a bad escape", "GET", "/fountain/api/sandboxes?sandbox_id=sb-b1&q=%zz", "", 400},
		{"a form pair after a semicolon", "POST", "/fountain/api/conversations", "prompt=hi;sandbox_id=sb-b1", 400},
		{"a form with a bad escape", "POST", "/fountain/api/conversations", "prompt=100%&sandbox_id=sb-b1", 400},
		{"the box's own", "POST", "/fountain/api/conversations?limit=1", "prompt=hi&sandbox_id=sb-alpha", 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			var body []byte
			var h http.Header
			if tt.body != "" {
				body, h = []byte(tt.body), form
			}
			resp := br.Do(tt.method, tt.path, alpha, body, h)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s %s = %d %q, want %d", tt.method, tt.path, tt.body, resp.StatusCode, msg, tt.want)
			}
			if reached := len(br.Fountain.Seen()) - before; tt.want == 400 && reached != 0 {
				t.Errorf("%s %s: Fountain received %d, want none", tt.method, tt.path, reached)
			}
			if tt.want == 400 && !strings.Contains(msg, `join parameters with "&" and write a "%" itself as %25`) {
				t.Errorf("%s %s: refusal %q, want it to say what to send instead", tt.method, tt.path, msg)
			}
		})
	}
}

// TestFountain_IdInABracketedParameterMustBeTheBoxs: Express (qs), Rack
// and PHP read a query's or form's "vault_ids[]", "vault_ids[0]" and
// "vault[id]" as a list and an object, as JSON's "vault_ids": [...] and
// "vault": {"id": ...}, which are checked: so are these.
func TestFountain_IdInABracketedParameterMustBeTheBoxs(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"a list", "GET", "/fountain/api/sandboxes/sb-alpha?vault_ids[]=v-b1", "", 403},
		{"a list, indexed and escaped", "GET", "/fountain/api/sandboxes/sb-alpha?vault_ids%5B0%5D=v-b1", "", 403},
		{"an object's id", "GET", "/fountain/api/sandboxes/sb-alpha?vault[id]=v-b1", "", 403},
		{"nested", "GET", "/fountain/api/sandboxes/sb-alpha?config[agent][vault_id]=v-b1", "", 403},
		{"an object's id, in a form", "POST", "/fountain/api/conversations", "prompt=hi&sandbox[id]=sb-b1", 403},
		{"a list, in a form", "POST", "/fountain/api/conversations", "prompt=hi&sandbox_ids[]=sb-alpha&sandbox_ids[]=sb-b1", 403},
		{"an object's other member", "POST", "/fountain/api/conversations", "prompt=hi&sandbox[name]=default", 201},
		{"the box's own", "GET", "/fountain/api/sandboxes/sb-alpha?vault_ids[]=v-alpha&config[sandbox][id]=sb-alpha", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			var body []byte
			var h http.Header
			if tt.body != "" {
				body, h = []byte(tt.body), form
			}
			resp := br.Do(tt.method, tt.path, alpha, body, h)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s %s = %d %q, want %d", tt.method, tt.path, tt.body, resp.StatusCode, msg, tt.want)
			}
			if reached := len(br.Fountain.Seen()) - before; tt.want == 403 && (reached != 0 || !strings.Contains(msg, "not this box's")) {
				t.Errorf("%s %s: %q, Fountain received %d; want a refusal saying it is not this box's, reaching no Fountain", tt.method, tt.path, msg, reached)
			}
		})
	}
}

// TestFountain_IdUnderANameFoldedAsGoFoldsItMustBeTheBoxs: encoding/json
// matches a member to a field as strings.EqualFold does, which reads "ſ"
// (U+017F) as "s": another box's id under "ſandbox_id" or "vault_idſ" is
// an id of that kind to a Fountain written in Go, and is checked.
func TestFountain_IdUnderANameFoldedAsGoFoldsItMustBeTheBoxs(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	for _, body := range []string{`{"ſandbox_id":"sb-b1"}`, `{"vault_idſ":["v-b1"]}`, `{"CONVERſATION_ID":"c-b1"}`} {
		before := len(br.Fountain.Seen())
		resp := br.Do("POST", "/fountain/api/conversations", alpha, []byte(body), http.Header{"Content-Type": {"application/json"}})
		_, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != 403 || !strings.Contains(msg, "not this box's") || len(br.Fountain.Seen()) != before {
			t.Errorf("POST %s = %d %q, Fountain received %d; want 403 saying it is not this box's, reaching no Fountain", body, resp.StatusCode, msg, len(br.Fountain.Seen())-before)
		}
	}
}

// TestFountain_IdInAnUntypedBodyMustBeTheBoxs: Rack reads a POST body
// with no Content-Type as an urlencoded form (splitting it at "&" and
// ";"); another box's id written so is checked as a form's field, and
// such a body over 1 MiB is refused as a form is, not passed on unread.
func TestFountain_IdInAnUntypedBodyMustBeTheBoxs(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	tests := []struct {
		body string
		want int
	}{
		{"prompt=hi&sandbox_id=sb-b1", 403},
		{"prompt=hi;vault[id]=v-b1", 403},
		{"prompt=100%&conversation_id=c-b1", 403},
		{"prompt=hi&sandbox_id=sb-alpha", 201},
		{"some bytes, no pairs", 201},
		{"prompt=" + strings.Repeat("x", fountain.MaxChecked) + "&sandbox_id=sb-b1", 413},
	}
	for _, tt := range tests {
		before := len(br.Fountain.Seen())
		resp := br.Do("POST", "/fountain/api/conversations", alpha, []byte(tt.body), nil)
		_, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != tt.want {
			t.Errorf("POST %.40q with no Content-Type = %d %q, want %d", tt.body, resp.StatusCode, msg, tt.want)
		}
		if reached := len(br.Fountain.Seen()) - before; tt.want == 403 && (reached != 0 || !strings.Contains(msg, "not this box's")) {
			t.Errorf("POST %.40q: %q, Fountain received %d; want a refusal saying it is not this box's, reaching no Fountain", tt.body, msg, reached)
		}
	}
}

// TestFountain_MethodOverrideIsNeverCarried: Rails' default stack
// (Rack::MethodOverride), Laravel and Symfony act on a POST as the method
// its X-HTTP-Method-Override header or _method field names. A box's POST
// to /fountain/api/sandboxes overridden to GET would be Fountain's
// listing, passed on whole, since the broker keeps only the box's own
// items of a GET. The override headers (X_HTTP_METHOD_OVERRIDE too,
// which Puma and Caddy's FastCGI hand on as the same) never reach
// Fountain, and a
// _method in the query or the body is a 400 reaching no Fountain.
func TestFountain_MethodOverrideIsNeverCarried(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	before := len(br.Fountain.Seen())
	h := http.Header{"Content-Type": {"application/json"}}
	for _, name := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
		h.Set(name, "GET")
	}
	h["X_HTTP_METHOD_OVERRIDE"] = []string{"GET"} // as Puma and Caddy's FastCGI read X-HTTP-Method-Override
	resp := br.Do("POST", "/fountain/api/sandboxes", alpha, []byte(`{"name":"s"}`), h)
	seen := br.Fountain.Seen()
	if resp.StatusCode != 200 || len(seen) != before+1 {
		t.Fatalf("POST with override headers = %d %s, Fountain received %d, want 200 and one request", resp.StatusCode, resp.Body, len(seen)-before)
	}
	for name := range seen[len(seen)-1].Header {
		if strings.Contains(strings.ToLower(name), "method") {
			t.Errorf("Fountain received %s: %q", name, seen[len(seen)-1].Header.Values(name))
		}
	}
	tests := []struct {
		name, path, ct, body string
	}{
		{"in the query", "/fountain/api/sandboxes?_method=GET", "application/json", `{"name":"s"}`},
		{"in a form", "/fountain/api/sandboxes", "application/x-www-form-urlencoded", "_method=GET"},
		{"in a form, as PHP names it", "/fountain/api/sandboxes", "application/x-www-form-urlencoded", "name=s&.method=GET"},
		{"in the query, as PHP names it", "/fountain/api/sandboxes?+_method=GET", "application/json", `{"name":"s"}`},
		{"in the query, as PHP reads a name cut at a NUL", "/fountain/api/sandboxes?_method%00x=GET", "application/json", `{"name":"s"}`},
		{"in an untyped body", "/fountain/api/sandboxes", "", "name=s&_method=GET"},
		{"in a multipart form", "/fountain/api/sandboxes", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nGET\r\n--b--\r\n"},
		{"in a multipart part named by its Content-ID, as Rack reads it", "/fountain/api/sandboxes", "multipart/form-data; boundary=b", "--b\r\nContent-ID: _method\r\n\r\nGET\r\n--b--\r\n"},
		{"in JSON", "/fountain/api/sandboxes", "application/json", `{"name":"s","_method":"GET"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			h := http.Header{}
			if tt.ct != "" {
				h.Set("Content-Type", tt.ct)
			}
			resp := br.Do("POST", tt.path, alpha, []byte(tt.body), h)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != 400 || !strings.Contains(msg, "_method") {
				t.Errorf("POST %s %q = %d %q, want 400 naming _method", tt.path, tt.body, resp.StatusCode, msg)
			}
			if reached := len(br.Fountain.Seen()) - before; reached != 0 {
				t.Errorf("POST %s %q: Fountain received %d, want none", tt.path, tt.body, reached)
			}
		})
	}
}

// TestFountain_PathOverrideHeadersNeverReachFountain: IIS's URL Rewrite
// sets X-Original-URL and X-Rewrite-URL, and Zend Framework and older
// Symfony route by them: a box's request to its own sandbox naming
// another box's there would be served on that one. Neither reaches
// Fountain, nor either written with "_" (X_Original_URL), which Caddy's
// FastCGI hands PHP as the same.
func TestFountain_PathOverrideHeadersNeverReachFountain(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	h := http.Header{"X-Original-Url": {"/api/sandboxes/sb-b1"}, "X-Rewrite-Url": {"/api/sandboxes/sb-b1"},
		"X_Original_URL": {"/api/sandboxes/sb-b1"}} // as Caddy's FastCGI reads X-Original-URL
	resp := br.Do("GET", "/fountain/api/sandboxes/sb-alpha", alpha, nil, h)
	seen := br.Fountain.Seen()
	if resp.StatusCode != 200 || len(seen) == 0 {
		t.Fatalf("GET = %d %s, want 200 from Fountain", resp.StatusCode, resp.Body)
	}
	for name, vs := range seen[len(seen)-1].Header {
		for _, v := range vs {
			if strings.Contains(v, "sb-b1") {
				t.Errorf("Fountain received %s: %q", name, v)
			}
		}
	}
}

// TestFountain_BodyUnderAContentTypeThatDoesNotParseIsRefused: PHP cuts
// a Content-Type at " ", "," or ";" and Rack at "," or ";", so both read
// "multipart/form-data x; boundary=b" or "multipart/form-data, x;
// boundary=b" as multipart, where Go's parser reads no type at all.
// Another box's id in a multipart part sent so would reach Fountain
// unchecked were the body read as a form: a body under a Content-Type
// that does not parse is a 400 reaching no Fountain, whatever it holds.
// So is one under a boundary PHP (the first "boundary" anywhere) or Rack
// (the last "boundary=") reads as another than Go's: a body may hold
// parts under both, another box's id under the one the broker skips.
// So is one under two Content-Types: Go reads the first, Apache and Puma
// join them (Rack then reading the last boundary).
func TestFountain_BodyUnderAContentTypeThatDoesNotParseIsRefused(t *testing.T) {
	br, alpha := ownershipBroker(t, nil)
	part := "--b\r\nContent-Disposition: form-data; name=\"sandbox_id\"\r\n\r\nsb-b1\r\n--b--\r\n"
	tests := []struct {
		name, method, ct, body string
		want                   int
	}{
		{"another box's id, under a type PHP reads as multipart", "POST", "multipart/form-data x; boundary=b", part, 400},
		{"another box's id, under a type Rack reads as multipart", "POST", "multipart/form-data, text/plain; boundary=b", part, 400},
		{"another box's id, under a boundary named twice", "POST", "multipart/form-data; boundary=a; boundary=b", part, 400},
		{"another box's id, under a boundary PHP reads as another", "POST", "multipart/form-data; xboundary=evil; boundary=b", "--evil\r\nContent-Disposition: form-data; name=\"sandbox_id\"\r\n\r\nsb-b1\r\n--evil--\r\n" + strings.Replace(part, "sb-b1", "sb-alpha", 1), 400},
		{"another box's id, under a boundary Rack reads as another", "POST", "multipart/form-data; boundary=b; xboundary=evil", "--evil\r\nContent-Disposition: form-data; name=\"sandbox_id\"\r\n\r\nsb-b1\r\n--evil--\r\n" + strings.Replace(part, "sb-b1", "sb-alpha", 1), 400},
		{"another box's id, under the second of two Content-Types", "POST", "multipart/form-data; boundary=a\nmultipart/form-data; boundary=b", part + strings.ReplaceAll(strings.Replace(part, "sb-b1", "sb-alpha", 1), "--b", "--a"), 400},
		{"the box's own, in JSON", "POST", "application/json x", `{"sandbox_id":"sb-alpha"}`, 400},
		{"no body", "GET", "multipart/form-data x; boundary=b", "", 200},
		{"the box's own, under a type that parses", "POST", "multipart/form-data; boundary=b", strings.Replace(part, "sb-b1", "sb-alpha", 1), 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(br.Fountain.Seen())
			path := "/fountain/api/conversations"
			if tt.method == "GET" {
				path = "/fountain/api/sandboxes/sb-alpha"
			}
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			resp := br.Do(tt.method, path, alpha, body, http.Header{"Content-Type": strings.Split(tt.ct, "\n")})
			typ, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %q = %d %q, want %d", tt.method, tt.ct, resp.StatusCode, msg, tt.want)
			}
			if tt.want != 400 {
				return
			}
			if typ != "invalid_request_error" || !strings.Contains(msg, "Content-Type does not parse") || !strings.Contains(msg, "Fountain") {
				t.Errorf("%q: refusal %q %q, want invalid_request_error naming Fountain and the Content-Type", tt.ct, typ, msg)
			}
			if reached := len(br.Fountain.Seen()) - before; reached != 0 {
				t.Errorf("%q: Fountain received %d, want none", tt.ct, reached)
			}
		})
	}
}
