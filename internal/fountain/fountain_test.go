package fountain_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

const key = "fk_operator_fountain_key_0123456789"

// every is a fountain entry with all four words.
var every = []string{"agent", "conversations", "sandboxes", "vault"}

func newBroker(t *testing.T, opt brokertest.Options) *brokertest.Broker {
	t.Helper()
	if opt.FountainHandler == nil {
		opt.Fountain = true
	}
	br := brokertest.New(t, opt)
	br.SetCredential("fountain", key)
	return br
}

func assign(t *testing.T, br *brokertest.Broker, box, kind, id string) {
	t.Helper()
	if err := br.Server.Store.AddResource(context.Background(), store.Resource{Box: box, Kind: kind, ID: id, At: time.Now()}); err != nil {
		t.Fatalf("AddResource(%s %s %s) = %v", box, kind, id, err)
	}
}

// tokenFree fails when a request Fountain received carries any of tokens.
func tokenFree(t *testing.T, seen []brokertest.Seen, tokens ...string) {
	t.Helper()
	for _, s := range seen {
		for _, tok := range tokens {
			where := ""
			for k, vs := range s.Header {
				for _, v := range vs {
					if strings.Contains(v, tok) {
						where = "header " + k
					}
				}
			}
			if strings.Contains(s.Path, tok) || strings.Contains(s.RawQuery, tok) {
				where = "URL"
			}
			if strings.Contains(string(s.Body), tok) {
				where = "body"
			}
			if where != "" {
				t.Errorf("Fountain received a box's token in its %s (%s %s)", where, s.Method, s.Path)
			}
		}
	}
}

func TestFountain_Forwards(t *testing.T) {
	br := newBroker(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	assign(t, br, "alpha", store.ResourceSandbox, "sb-alpha")
	assign(t, br, "alpha", store.ResourceVault, "v-alpha")
	tests := []struct {
		name, method, path, query, body string
		header                          http.Header
		wantPath                        string
	}{
		{name: "list conversations with a query", method: "GET", path: "/fountain/api/conversations", query: "limit=5&after=c%2F1", wantPath: "/api/conversations"},
		{name: "list sandboxes", method: "GET", path: "/fountain/api/sandboxes", wantPath: "/api/sandboxes"},
		{name: "delete the box's sandbox", method: "DELETE", path: "/fountain/api/sandboxes/sb-alpha", wantPath: "/api/sandboxes/sb-alpha"},
		{name: "put a secret in the box's vault", method: "PUT", path: "/fountain/api/vaults/v-alpha/secrets/API_KEY", body: `{"value":"v"}`, wantPath: "/api/vaults/v-alpha/secrets/API_KEY"},
		{name: "the token as x-api-key, with cookies", method: "GET", path: "/fountain/api/vaults", wantPath: "/api/vaults",
			header: http.Header{"X-Api-Key": {tok}, "Cookie": {"session=" + tok}, "Chant-Grant": {"g_" + tok}}},
		{name: "a box naming Authorization as hop-by-hop", method: "GET", path: "/fountain/api/sandboxes", wantPath: "/api/sandboxes",
			header: http.Header{"Connection": {"Authorization, X-Api-Key"}, "Proxy-Authorization": {"Bearer " + tok}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := len(br.Fountain.Seen())
			path := tt.path
			if tt.query != "" {
				path += "?" + tt.query
			}
			resp := br.Do(tt.method, path, tok, []byte(tt.body), tt.header)
			if resp.StatusCode != 200 {
				t.Fatalf("%s %s = %d %s, want 200", tt.method, path, resp.StatusCode, resp.Body)
			}
			seen := br.Fountain.Seen()[n:]
			if len(seen) != 1 {
				t.Fatalf("Fountain received %d requests, want 1", len(seen))
			}
			s := seen[0]
			if s.Method != tt.method || s.Path != tt.wantPath || s.RawQuery != tt.query || string(s.Body) != tt.body {
				t.Errorf("Fountain received %s %s?%s %q, want %s %s?%s %q", s.Method, s.Path, s.RawQuery, s.Body, tt.method, tt.wantPath, tt.query, tt.body)
			}
			if got := s.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+key {
				t.Errorf("Fountain received Authorization %d values, want exactly the operator's key as the bearer", len(got))
			}
			tokenFree(t, seen, tok)
			var echo struct{ Method, Path string }
			if err := json.Unmarshal(resp.Body, &echo); err != nil || echo.Path != tt.wantPath {
				t.Errorf("answer = %s, want Fountain's answer for %s", resp.Body, tt.wantPath)
			}
			if strings.Contains(string(resp.Body), key) {
				t.Errorf("answer carries the operator's key")
			}
		})
	}
}

// TestFountain_RefusalsNameFountainAndTheWord: each word, missing from a
// declaration that holds the other three, is a 403 naming fountain and
// the word, and nothing reaches Fountain.
func TestFountain_RefusalsNameFountainAndTheWord(t *testing.T) {
	br := newBroker(t, brokertest.Options{})
	tests := []struct {
		word, method, path string
	}{
		{"agent", "POST", "/fountain/api/conversations"},
		{"conversations", "GET", "/fountain/api/conversations"},
		{"conversations", "POST", "/fountain/api/conversations/"},
		{"conversations", "POST", "/fountain/api/conversations/c1/messages"},
		{"sandboxes", "GET", "/fountain/api/sandboxes"},
		{"sandboxes", "DELETE", "/fountain/api/sandboxes/s1"},
		{"vault", "GET", "/fountain/api/vaults"},
		{"vault", "PUT", "/fountain/api/vaults/v1/secrets/API_KEY"},
	}
	for i, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var words []string
			for _, w := range every {
				if w != tt.word {
					words = append(words, w)
				}
			}
			name := "box-" + string(rune('a'+i))
			tok := br.AddBox(name)
			br.Report(tok, brokertest.Entry("fountain", words...))
			resp := br.Do(tt.method, tt.path, tok, []byte(`{}`), nil)
			typ, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != 403 || typ != "permission_error" || !strings.Contains(msg, "fountain") || !strings.Contains(msg, tt.word) {
				t.Errorf("%s %s without %s = %d %q, want 403 naming fountain and %s", tt.method, tt.path, tt.word, resp.StatusCode, msg, tt.word)
			}
		})
	}
	unreported := br.AddBox("unreported")
	for _, tt := range tests {
		if resp := br.Do(tt.method, tt.path, unreported, nil, nil); resp.StatusCode != 403 {
			t.Errorf("%s %s from a box that never reported = %d, want 403", tt.method, tt.path, resp.StatusCode)
		}
	}
	if seen := br.Fountain.Seen(); len(seen) != 0 {
		t.Errorf("Fountain received %d requests, want none", len(seen))
	}
}

// TestFountain_PathCannotLeaveItsFamily: any path under /fountain other
// than the three families is a 404 that reaches no upstream, including
// paths an upstream could normalise into another family or route.
func TestFountain_PathCannotLeaveItsFamily(t *testing.T) {
	br := newBroker(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	assign(t, br, "alpha", store.ResourceSandbox, "sb-alpha")
	paths := []string{
		"/fountain",
		"/fountain/",
		"/fountain/api",
		"/fountain/api/",
		"/fountain/api/agents",
		"/fountain/api/other",
		"/fountain/api/vault",
		"/fountain/api/conversationsx",
		"/fountain//api/conversations",
		"/fountain/api/sandboxes/../agents",
		"/fountain/api/sandboxes/sb-alpha/../../agents",
		"/fountain/api/sandboxes/%2e%2e/agents",
		"/fountain/api/sandboxes/sb-alpha/%2E%2E/sb-b1",
		"/fountain/api/sandboxes/./sb-alpha",
		"/fountain/api/sandboxes//sb-b1",
		"/fountain/api/sandboxes/sb-alpha%5C..%5Cagents",
		"/fountain/api/vaults/v%00",
		"/fountain/v1/conversations",
		"/fountain/api/sandboxes/sb-alpha%2F..%2F..%2Fagents",
		"/fountain/api/sandboxes/sb-alpha%2F%2E%2E%2F%2E%2E%2Fagents",
		"/fountain/api/sandboxes/sb-alpha%2F..%2Fsb-b1",
		"/fountain/api/sandboxes/%252e%252e/agents",
		"/fountain/api/sandboxes/sb-alpha/%252e%252e/%252e%252e/agents",
		"/fountain/api/sandboxes/sb-alpha%2F%2Fevil.example",
		"/fountain/api/vaults/%2F%2Fevil.example",
		"/fountain/api/sandboxes/sb-alpha/..;x/..;x/agents",
		"/fountain/api/sandboxes/sb-alpha/%252F..%252F..%252Fagents",
	}
	for _, p := range paths {
		for _, method := range []string{"GET", "POST"} {
			resp := br.Do(method, p, tok, nil, nil)
			if resp.StatusCode != 404 {
				t.Errorf("%s %s = %d %s, want 404", method, p, resp.StatusCode, resp.Body)
			}
		}
	}
	if seen := br.Fountain.Seen(); len(seen) != 0 {
		t.Errorf("Fountain received %d requests, want none (first: %s %s)", len(seen), seen[0].Method, seen[0].Path)
	}
}

func TestFountain_ConversationIsRecordedFromTheAnswer(t *testing.T) {
	br := newBroker(t, brokertest.Options{})
	alpha := br.AddBox("alpha")
	beta := br.AddBox("beta")
	br.Report(alpha, brokertest.Entry("fountain", "agent", "conversations"))
	br.Report(beta, brokertest.Entry("fountain", "agent", "conversations"))
	resp := br.Do("POST", "/fountain/api/conversations", alpha, []byte(`{"agent":"helper"}`), nil)
	if resp.StatusCode != 201 {
		t.Fatalf("POST /fountain/api/conversations = %d %s, want Fountain's 201", resp.StatusCode, resp.Body)
	}
	var started struct{ ID string }
	if err := json.Unmarshal(resp.Body, &started); err != nil || started.ID == "" {
		t.Fatalf("answer = %s, want Fountain's answer with an id", resp.Body)
	}
	owner, err := br.Server.Store.ResourceOwner(context.Background(), store.ResourceConversation, started.ID)
	if err != nil || owner != "alpha" {
		t.Fatalf("ResourceOwner(conversation, %s) = %q, %v, want alpha", started.ID, owner, err)
	}
	// At once, the box can use it; another box cannot.
	path := "/fountain/api/conversations/" + started.ID + "/messages"
	if resp := br.Do("POST", path, alpha, []byte(`{"text":"hi"}`), nil); resp.StatusCode != 200 {
		t.Errorf("alpha POST %s = %d %s, want 200", path, resp.StatusCode, resp.Body)
	}
	n := len(br.Fountain.Seen())
	resp = br.Do("GET", path, beta, nil, nil)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(msg, "not this box's") || strings.Contains(msg, "alpha") {
		t.Errorf("beta GET %s = %d %q, want 403 saying it is not this box's, naming no other box", path, resp.StatusCode, msg)
	}
	if len(br.Fountain.Seen()) != n {
		t.Errorf("beta's refused request reached Fountain")
	}
	tokenFree(t, br.Fountain.Seen(), alpha, beta)
}

func TestFountain_OtherBoxesIDsAreRefused(t *testing.T) {
	br := newBroker(t, brokertest.Options{})
	alpha := br.AddBox("alpha")
	br.AddBox("beta")
	br.Report(alpha, brokertest.Entry("fountain", every...))
	assign(t, br, "beta", store.ResourceSandbox, "sb-b1")
	assign(t, br, "beta", store.ResourceVault, "v-b1")
	assign(t, br, "beta", store.ResourceConversation, "c-b1")
	assign(t, br, "alpha", store.ResourceSandbox, "sb-alpha")
	tests := []struct {
		name, method, path, want string
	}{
		{"another box's sandbox", "DELETE", "/fountain/api/sandboxes/sb-b1", "another box's"},
		{"another box's vault, deeper", "PUT", "/fountain/api/vaults/v-b1/secrets/API_KEY", "another box's"},
		{"another box's conversation", "GET", "/fountain/api/conversations/c-b1", "another box's"},
		{"another box's conversation, trailing slash", "GET", "/fountain/api/conversations/c-b1/", "another box's"},
		{"a sandbox id recorded as a vault only", "GET", "/fountain/api/vaults/sb-alpha", "no record"},
		{"an id nobody recorded", "GET", "/fountain/api/sandboxes/sb-unknown", "no record"},
		{"a conversation nobody recorded", "POST", "/fountain/api/conversations/c-unknown/messages", "no record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := br.Do(tt.method, tt.path, alpha, []byte(`{}`), nil)
			typ, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != 403 || typ != "permission_error" || !strings.Contains(msg, "not this box's") || !strings.Contains(msg, tt.want) || strings.Contains(msg, "beta") {
				t.Errorf("%s %s = %d %q, want 403 saying it is not this box's (%s), naming no other box", tt.method, tt.path, resp.StatusCode, msg, tt.want)
			}
		})
	}
	if seen := br.Fountain.Seen(); len(seen) != 0 {
		t.Errorf("Fountain received %d requests, want none", len(seen))
	}
	if resp := br.Do("GET", "/fountain/api/sandboxes/sb-alpha", alpha, nil, nil); resp.StatusCode != 200 {
		t.Errorf("GET the box's own sandbox = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}

func TestFountain_NoKeyIsRefused(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{Fountain: true})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	resp := br.Do("GET", "/fountain/api/conversations", tok, nil, nil)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(msg, "operator has set no Fountain key") {
		t.Errorf("GET /fountain/api/conversations with no key = %d %q, want 403 saying the operator has set none", resp.StatusCode, msg)
	}
	if seen := br.Fountain.Seen(); len(seen) != 0 {
		t.Errorf("Fountain received %d requests, want none", len(seen))
	}
}

func TestFountain_NotServedWithoutAnUpstream(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	if resp := br.Do("GET", "/fountain/api/conversations", tok, nil, nil); resp.StatusCode != 404 {
		t.Errorf("GET /fountain/api/conversations with no Fountain URL = %d, want 404", resp.StatusCode)
	}
}

// TestFountain_KeyRepeatedInAnswerHeadersIsRemoved: no answer to a box
// carries the operator's key, even when Fountain repeats it.
func TestFountain_KeyRepeatedInAnswerHeadersIsRemoved(t *testing.T) {
	br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("X-Kept", "yes")
		_, _ = io.WriteString(w, `{}`)
	})})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	resp := br.Do("GET", "/fountain/api/conversations", tok, nil, nil)
	for k, vs := range resp.Header {
		for _, v := range vs {
			if strings.Contains(v, key) {
				t.Errorf("answer header %s carries the operator's key", k)
			}
		}
	}
	if resp.Header.Get("X-Kept") != "yes" {
		t.Errorf("answer lost Fountain's other headers")
	}
}

func TestFountain_UnusableAnswersAreNotRecorded(t *testing.T) {
	big := `{"id":"conv_big","pad":"` + strings.Repeat("x", 70<<10) + `"}`
	tests := []struct {
		name, answer, contentType string
		status                    int
	}{
		{"over the bound", big, "application/json", 201},
		{"no id", `{"status":"started"}`, "application/json", 201},
		{"an id with a slash", `{"id":"a/b"}`, "application/json", 201},
		{"not JSON", `started conv_1`, "text/plain", 201},
		{"an error", `{"id":"conv_err"}`, "application/json", 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.answer)
			})})
			tok := br.AddBox("alpha")
			br.Report(tok, brokertest.Entry("fountain", "agent"))
			resp := br.Do("POST", "/fountain/api/conversations", tok, nil, nil)
			if resp.StatusCode != tt.status || string(resp.Body) != tt.answer {
				t.Fatalf("POST /fountain/api/conversations = %d (%d bytes), want Fountain's %d answer unchanged", resp.StatusCode, len(resp.Body), tt.status)
			}
			if rs, err := br.Server.Store.ListResources(context.Background(), "alpha"); err != nil || len(rs) != 0 {
				t.Errorf("ListResources(alpha) = %v, %v, want none recorded", rs, err)
			}
		})
	}
}

// TestFountain_StartedIDOfAnotherBoxIsNotPassedOn: Fountain answering with
// an id the broker has as another box's is a 502, and the answer is not
// passed on.
func TestFountain_StartedIDOfAnotherBoxIsNotPassedOn(t *testing.T) {
	br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"id":"c-b1"}`)
	})})
	alpha := br.AddBox("alpha")
	br.AddBox("beta")
	assign(t, br, "beta", store.ResourceConversation, "c-b1")
	br.Report(alpha, brokertest.Entry("fountain", "agent"))
	resp := br.Do("POST", "/fountain/api/conversations", alpha, nil, nil)
	if resp.StatusCode != 502 || strings.Contains(string(resp.Body), "c-b1") {
		t.Errorf("POST /fountain/api/conversations answered with another box's id = %d %s, want 502 without it", resp.StatusCode, resp.Body)
	}
}

// TestFountain_StreamedStartIsNotHeld: a started conversation answered as
// an event stream reaches the box event by event.
func TestFountain_StreamedStartIsNotHeld(t *testing.T) {
	release := make(chan struct{})
	br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"conv_s\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "data: done\n\n")
	})})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", "agent"))
	req, _ := http.NewRequest("POST", br.URL+"/fountain/api/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err == nil && !strings.Contains(line, "conv_s") {
			err = errors.New("first line " + line)
		}
		first <- err
	}()
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("reading the first event: %v", err)
		}
	case <-time.After(10 * time.Second): // a deadlock guard, not a timing assertion
		t.Fatal("the first event never arrived while Fountain held the rest: the broker held the stream")
	}
	close(release)
}
