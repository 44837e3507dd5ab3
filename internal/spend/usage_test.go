package spend

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzReadAnswer checks readAnswer against encoding/json: it reads an
// answer exactly when json.Unmarshal decodes it without error and finds a
// usage, and then the same model and usage, unless a name could match a
// read one only case-insensitively (which encoding/json reads, and
// readAnswer does not).
//
//	go test -run '^$' -fuzz FuzzReadAnswer -fuzztime 30s ./internal/spend/
func FuzzReadAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","usage":{"input_tokens":1,"output_tokens":2,"cache_creation_input_tokens":3,"cache_read_input_tokens":4,"cache_creation":{"ephemeral_5m_input_tokens":1,"ephemeral_1h_input_tokens":2}}}`,
		`{"usage":{"input_tokens":1},"usage":{"output_tokens":2},"model":"a","model":"b"}`,
		`{"usage":{"input_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":9}},"usage":null,"usage":{"output_tokens":2}}`,
		`{"usage":{"input_tokens":-5,"output_tokens":null,"server_tool_use":{"web_search_requests":1}},"model":null}`,
		`{"model":"m","usage":{"input_tokens":1.5}}`,
		`{"model":"claude\u002dhaiku","usage":{"output_tokens":1}}`,
		`{"model":"m","USAGE":{"output_tokens":1},"usage":{}}`,
		`{"model":"m","usage":{"server_tool_use":{"web_search_requests":3},"server_tool_use":null,"server_tool_use":{"web_search_requests":2}}}`,
		`{"model":"m","usage":{"server_tool_use":"x"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want struct {
			Model string `json:"model"`
			Usage *struct {
				InputTokens              *int64 `json:"input_tokens"`
				OutputTokens             *int64 `json:"output_tokens"`
				CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
				CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
				CacheCreation            *struct {
					Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
				} `json:"cache_creation"`
				ServerToolUse *struct {
					WebSearchRequests *int64 `json:"web_search_requests"`
				} `json:"server_tool_use"`
			} `json:"usage"`
		}
		jerr := json.Unmarshal(body, &want)
		model, u, ok := readAnswer(body)
		folds := strings.ContainsAny(string(body), "ABCDEFGHIJKLMNOPQRSTUVWXYZ\\\u212a\u017f")
		if folds {
			if jerr != nil && ok {
				t.Fatalf("readAnswer(%q) read an answer json.Unmarshal refuses: %v", body, jerr)
			}
			return
		}
		if wantOK := jerr == nil && want.Usage != nil; ok != wantOK {
			t.Fatalf("readAnswer(%q) ok = %v, json.Unmarshal %v, usage %v", body, ok, jerr, want.Usage != nil)
		}
		if !ok {
			return
		}
		var got, wantTokens Tokens
		u.tokens(&got)
		take := func(to *int64, v *int64) {
			if v != nil && *v >= 0 {
				*to = min(*v, MaxReportedTokens)
			}
		}
		w := want.Usage
		take(&wantTokens.Input, w.InputTokens)
		take(&wantTokens.Output, w.OutputTokens)
		take(&wantTokens.CacheWrite, w.CacheCreationInputTokens)
		take(&wantTokens.CacheRead, w.CacheReadInputTokens)
		if w.CacheCreation != nil {
			take(&wantTokens.CacheWrite1h, w.CacheCreation.Ephemeral1h)
		}
		if w.ServerToolUse != nil {
			take(&wantTokens.WebSearches, w.ServerToolUse.WebSearchRequests)
		}
		if model != want.Model || got != wantTokens {
			t.Errorf("readAnswer(%q) = %q %+v, json.Unmarshal %q %+v", body, model, got, want.Model, wantTokens)
		}
	})
}
