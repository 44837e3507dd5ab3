package broker_test

import (
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestDeclaration_LookalikeScopeWordsAllowNothing: a box reports scope
// words, capability entries and broker words that read like the ones a
// request needs (another case, full-width letters, a zero-width or
// surrounding space, a Cyrillic letter; a duplicated "capabilities" key
// whose first value declares the word), hoping a comparison folds them
// together. The rule compares words exactly as the report's JSON
// decodes them: each is a 403 naming the word, and nothing reaches the
// upstream. A JSON escape of the very word ("\u0061gent") is the word.
func TestDeclaration_LookalikeScopeWordsAllowNothing(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("a")
	b.SetCredential("anthropic", "sk-ant-api03-lookalike")
	tests := []struct {
		name, report string
		allowed      bool
	}{
		{"the word itself, JSON-escaped", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["\u0061gent"]}]}`, true},
		{"upper case", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["Agent","AGENT"]}]}`, false},
		{"full-width letters", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["ａｇｅｎｔ"]}]}`, false},
		{"zero-width space", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent\u200b","\ufeffagent"]}]}`, false},
		{"surrounding space", `{"capabilities":[{"name":"inference","broker":"lobby","scope":[" agent","agent "]}]}`, false},
		{"Cyrillic a", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["аgent"]}]}`, false},
		{"broker word in another case", `{"capabilities":[{"name":"inference","broker":"Lobby","scope":["agent"]},{"name":"inference","broker":"lobby ","scope":["agent"]}]}`, false},
		{"capabilities given twice, the last without", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}],"capabilities":[]}`, false},
		{"scope given twice, the last without", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"],"scope":["decide"]}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if resp := b.Do("POST", protocol.RouteDeclaration, tok, []byte(tt.report), nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("report = %d %s, want 200", resp.StatusCode, resp.Body)
			}
			before := len(b.Upstream.Seen())
			resp := b.Do("GET", "/llm/anthropic/v1/models", tok, nil, nil)
			if tt.allowed {
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET /v1/models after %s = %d %s, want 200", tt.report, resp.StatusCode, resp.Body)
				}
				return
			}
			if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || msg == "" {
				t.Errorf("GET /v1/models after %s = %d %s, want a 403", tt.report, resp.StatusCode, resp.Body)
			}
			if n := len(b.Upstream.Seen()) - before; n != 0 {
				t.Errorf("the upstream received %d requests after %s, want none", n, tt.report)
			}
		})
	}
}

// TestBroker_TokenInOddPlacesAuthenticatesNothing: a client puts a box's
// token where the protocol reads none (a cookie, Proxy-Authorization,
// Basic or another scheme, the query), or sends two boxes' tokens in
// repeated Authorization headers, hoping one of them is read as the
// box's. Neither the declaration route (401) nor a model route (403)
// takes any of them, and nothing reaches the upstream; Bearer in any case
// is the protocol's, and is taken.
func TestBroker_TokenInOddPlacesAuthenticatesNothing(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("a")
	other := b.AddBox("b")
	b.SetCredential("anthropic", "sk-ant-api03-oddplaces")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	b.Report(other, brokertest.Entry("inference", "agent"))
	basic := base64.StdEncoding.EncodeToString([]byte("box:" + tok))
	tests := []struct {
		name   string
		query  string
		header http.Header
		taken  bool
	}{
		{"bearer, lower case", "", http.Header{"Authorization": {"bearer " + tok}}, true},
		{"bearer, upper case", "", http.Header{"Authorization": {"BEARER " + tok}}, true},
		{"cookie", "", http.Header{"Cookie": {"token=" + tok + "; x-api-key=" + tok}}, false},
		{"proxy-authorization", "", http.Header{"Proxy-Authorization": {"Bearer " + tok}}, false},
		{"basic", "", http.Header{"Authorization": {"Basic " + basic}}, false},
		{"another scheme", "", http.Header{"Authorization": {"Token " + tok}}, false},
		{"no scheme", "", http.Header{"Authorization": {tok}}, false},
		{"query", "?token=" + tok + "&x-api-key=" + tok + "&key=" + tok, http.Header{"X-Probe": {"1"}}, false},
		{"two boxes' tokens, repeated", "", http.Header{"Authorization": {"Bearer " + tok, "Bearer " + other}}, false},
		{"two boxes' tokens, bearer and x-api-key", "", http.Header{"Authorization": {"Bearer " + tok}, "X-Api-Key": {other}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(b.Upstream.Seen())
			decl := b.Do("POST", protocol.RouteDeclaration+tt.query, "", []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`), tt.header)
			models := b.Do("GET", "/llm/anthropic/v1/models"+tt.query, "", nil, tt.header)
			if tt.taken {
				if decl.StatusCode != http.StatusOK || models.StatusCode != http.StatusOK {
					t.Errorf("report = %d, models = %d; want both 200", decl.StatusCode, models.StatusCode)
				}
				return
			}
			if decl.StatusCode != http.StatusUnauthorized {
				t.Errorf("report = %d %s, want 401", decl.StatusCode, decl.Body)
			}
			if models.StatusCode != http.StatusForbidden {
				t.Errorf("models = %d %s, want 403", models.StatusCode, models.Body)
			}
			if n := len(b.Upstream.Seen()) - before; n != 0 {
				t.Errorf("the upstream received %d requests, want none", n)
			}
		})
	}
}
