package inference

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
)

func TestReadRequest(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	const unread = -42
	tests := []struct {
		name      string
		body      string
		ok        bool
		model     string
		maxTokens int64 // unread: not read
	}{
		{"plain", `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[]}`, true, "claude-sonnet-4-5", 1024},
		{"white space", " \t\r\n{ \"max_tokens\" : 7 ,\n\"model\"\t:\"m\" }\n", true, "m", 7},
		{"nested names are not read", `{"messages":[{"model":"x","max_tokens":9}],"metadata":{"model":"y"},"model":"z"}`, true, "z", unread},
		{"strings that hold the names", `{"system":"\"model\":\"x\",\"max_tokens\":9","model":"z","max_tokens":3}`, true, "z", 3},
		{"a value that holds a name", `{"model":"max_tokens","max_tokens":1}`, true, "max_tokens", 1},
		{"escaped names", `{"mod\u0065l":"a","max\u005ftokens":12}`, true, "a", 12},
		{"escaped model", `{"model":"claude\u002dhaiku\n\"4\"\\\/"}`, true, "claude-haiku\n\"4\"\\/", unread},
		{"the last of duplicates", `{"model":"a","max_tokens":1,"model":"b","max_tokens":2}`, true, "b", 2},
		{"null keeps a string, empties a number", `{"model":"a","model":null,"max_tokens":5,"max_tokens":null}`, true, "a", unread},
		{"negative", `{"max_tokens":-3}`, true, "", -3},
		{"minus zero", `{"max_tokens":-0}`, true, "", 0},
		{"largest", `{"max_tokens":9223372036854775807}`, true, "", 9223372036854775807},
		{"smallest", `{"max_tokens":-9223372036854775808}`, true, "", -9223372036854775808},
		{"past int64", `{"max_tokens":9223372036854775808}`, false, "", unread},
		{"far past int64", `{"max_tokens":123456789012345678901234567890}`, false, "", unread},
		{"a fraction", `{"max_tokens":1.0}`, false, "", unread},
		{"an exponent", `{"max_tokens":1e3}`, false, "", unread},
		{"a string max_tokens", `{"max_tokens":"5"}`, false, "", unread},
		{"a number model", `{"model":5}`, false, "", unread},
		{"an object model", `{"model":{}}`, false, "", unread},
		{"a boolean model", `{"model":true}`, false, "", unread},
		{"wrong kind of a name that folds", `{"model":"a","MAX_TOKENS":"x"}`, false, "", unread},
		{"other members of any kind", `{"a":1.5e-3,"b":[true,false,null,{}],"c":{"d":-0.0E+1},"model":"m"}`, true, "m", unread},
		{"null", `null`, true, "", unread},
		{"an array", `[{"model":"m"}]`, false, "", unread},
		{"a string", `"model"`, false, "", unread},
		{"empty", ``, false, "", unread},
		{"white space only", `  `, false, "", unread},
		{"cut off", `{"model":"m","max_tokens":5`, false, "", unread},
		{"cut off in a number", `{"max_tokens":5`, false, "", unread},
		{"a number", `5`, false, "", unread},
		{"a number with space", ` -1.5e3 `, false, "", unread},
		{"after the object", `{"model":"m"} {}`, false, "", unread},
		{"trailing comma", `{"model":"m",}`, false, "", unread},
		{"leading zero", `{"a":01}`, false, "", unread},
		{"bad escape", `{"a":"\x"}`, false, "", unread},
		{"short \\u", `{"a":"\u12"}`, false, "", unread},
		{"control character", "{\"a\":\"\x01\"}", false, "", unread},
		{"single quotes", `{'model':'m'}`, false, "", unread},
		{"mismatched", `{"a":[}]}`, false, "", unread},
		{"bad literal", `{"a":nul}`, false, "", unread},
		{"invalid UTF-8 kept as json reads it", "{\"model\":\"a\xffb\"}", true, "a\uFFFDb", unread},
		{"deepest encoding/json takes", `{"a":` + deep(9999) + `,"model":"m"}`, true, "m", unread},
		{"too deep", `{"a":` + deep(10000) + `,"model":"m"}`, false, "", unread},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want struct {
				Model     string `json:"model"`
				MaxTokens *int64 `json:"max_tokens"`
			}
			if err := json.Unmarshal([]byte(tt.body), &want); (err == nil) != tt.ok {
				t.Fatalf("json.Unmarshal(%.40q) = %v: the test is wrong", tt.body, err)
			}
			got, ok := readRequest([]byte(tt.body))
			if !json.Valid([]byte(tt.body)) {
				return // not checked: the API refuses it unbilled, whatever it reads as
			}
			if ok != tt.ok {
				t.Fatalf("readRequest(%.40q) ok = %v, want %v", tt.body, ok, tt.ok)
			}
			if !ok {
				return
			}
			if got.model != tt.model || got.maxSet != (tt.maxTokens != unread) || got.maxSet && got.maxTokens != tt.maxTokens {
				t.Errorf("readRequest(%.40q) = %+v, want model %q, max_tokens %d", tt.body, got, tt.model, tt.maxTokens)
			}
		})
	}
}

// estimateJSON is the estimate made from the body's fields as
// json.Unmarshal reads them, names matched case-insensitively.
func estimateJSON(body []byte) capability.Estimate {
	e := capability.Estimate{Calls: 1}
	var req struct {
		Model     string `json:"model"`
		MaxTokens *int64 `json:"max_tokens"`
	}
	if json.Unmarshal(body, &req) == nil {
		e.Model = req.Model
		if req.MaxTokens != nil && *req.MaxTokens >= 0 {
			e.MaxTokens, e.Capped = *req.MaxTokens, true
		}
	}
	return e
}

// output is the output bound of e, with meter the meter's own.
func output(e capability.Estimate, meter int64) int64 {
	if e.Capped {
		return e.MaxTokens
	}
	return max(e.MaxTokens, meter)
}

// TestEstimate_CaseFoldedNamesNeverLower: encoding/json reads
// "MAX_TOKENS" and "Model" as max_tokens and model; Estimate reads names
// exactly, and takes the safe side when a body has such a name.
func TestEstimate_CaseFoldedNamesNeverLower(t *testing.T) {
	c := New(Config{})
	r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
	tests := []struct {
		name  string
		body  string
		model string
		out   int64
	}{
		{"folded max_tokens alone", `{"model":"claude-haiku-4-5","MAX_TOKENS":5}`, "claude-haiku-4-5", 64000},
		{"folded max_tokens after", `{"model":"claude-haiku-4-5","max_tokens":5,"Max_Tokens":100000}`, "claude-haiku-4-5", 100000},
		{"folded max_tokens before", `{"model":"claude-haiku-4-5","MAX_TOKENS":100000,"max_tokens":5}`, "claude-haiku-4-5", 100000},
		{"Kelvin sign", `{"model":"claude-haiku-4-5","max_to\u212Aens":70000}`, "claude-haiku-4-5", 70000},
		{"folded model", `{"model":"claude-haiku-4-5","MODEL":"claude-opus-4-1","max_tokens":5}`, "", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Estimate(r, []byte(tt.body))
			if got.Model != tt.model || output(got, 64000) != tt.out {
				t.Errorf("Estimate(%s) = model %q output %d, want %q, %d", tt.body, got.Model, output(got, 64000), tt.model, tt.out)
			}
			if old := estimateJSON([]byte(tt.body)); output(got, 64000) < output(old, 64000) || got.Model != old.Model && got.Model != "" {
				t.Errorf("Estimate(%s) = %+v, under encoding/json's %+v", tt.body, got, old)
			}
		})
	}
}

// FuzzEstimate checks Estimate against encoding/json: it reads a body
// exactly when json.Unmarshal decodes it without error, and then the
// same model and max_tokens, but where a name matches only
// case-insensitively; and then it names no model and bounds the output
// at least as high.
//
//	go test -run '^$' -fuzz FuzzEstimate -fuzztime 30s ./internal/inference/
func FuzzEstimate(f *testing.F) {
	for _, seed := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`,
		`{"messages":[{"model":"x","max_tokens":9}],"model":"z","max_tokens":-1}`,
		`{"mod\u0065l":"a\ud83d\ude00\ud800","MAX_TOKENS":5,"max_tokens":null}`,
		`{"model":"a","model":null,"max_tokens":1e3}`,
		`{"a":[1,-0.5E+2,true,false,null,"\"model\""],"b":{"c":{}}}`,
		`null`,
		`[]`,
		"{\"model\":\"a\xffb\"}",
		`{"max_to\u212Aens":70000,"max_tokens":5}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`,
		`{"model":"m","messages":[{"content":[{"type":"tool_result","content":[{"source":{"type":"base64","type":null}}]}]}]}`,
		`{"system":[{"source":{"type":"content","content":[{"source":{"type":"file"}}]}}],"tools":[{"type":"web_search_20250305","max_uses":3},{"type":"x"}],"mcp_servers":[{}]}`,
		`{"model":"m","max_tokens":1,"inference_geo":"us","tools":[{"type":"bash_20250124","name":"bash"}]}`,
	} {
		f.Add([]byte(seed))
	}
	c := New(Config{})
	r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		var want struct {
			Model     string `json:"model"`
			MaxTokens *int64 `json:"max_tokens"`
		}
		got, ok := readRequest(body)
		if !json.Valid(body) {
			return // the API refuses it unbilled; reading it must only not panic
		}
		jerr := json.Unmarshal(body, &want)
		if ok != (jerr == nil) {
			t.Fatalf("readRequest(%q) ok = %v, json.Unmarshal = %v", body, ok, jerr)
		}
		e, old := c.Estimate(r, body), estimateJSON(body)
		if !ok {
			if e.Unboundable == "" || e != (capability.Estimate{Calls: 1, Unboundable: e.Unboundable}) {
				t.Errorf("Estimate(%q) = %+v of a body json.Unmarshal refuses", body, e)
			}
			return
		}
		if !got.foldModel && got.model != want.Model {
			t.Errorf("readRequest(%q) model = %q, json.Unmarshal %q", body, got.model, want.Model)
		}
		if !got.foldMax && (got.maxSet != (want.MaxTokens != nil) || got.maxSet && got.maxTokens != *want.MaxTokens) {
			t.Errorf("readRequest(%q) max_tokens = %d (read %v), json.Unmarshal %v", body, got.maxTokens, got.maxSet, want.MaxTokens)
		}
		// The API-side input: at least what encoding/json reads (the
		// walk takes every one of duplicate members, not only the last).
		if u := unboundedJSON(body); u.Unbounded && !e.Unbounded || e.Unbounded && e.Rounds < u.Rounds ||
			e.Searches < u.Searches || u.Unboundable != "" && e.Unboundable == "" {
			t.Errorf("Estimate(%q) = %+v, under encoding/json's reading %+v", body, e, u)
		}
		e.Unbounded, e.Rounds, e.Searches, e.Unboundable, e.ToolTokens, e.Geo = false, 0, 0, "", 0, ""
		if !got.foldModel && !got.foldMax && e != old {
			t.Errorf("Estimate(%q) = %+v, from encoding/json %+v", body, e, old)
		}
		if output(e, 64000) < output(old, 64000) || e.Model != old.Model && e.Model != "" {
			t.Errorf("Estimate(%q) = %+v, under encoding/json's %+v", body, e, old)
		}
	})
}

// TestEstimate_Unbounded: a body whose input the API fetches or makes
// itself — a source by URL or file, a server tool, an MCP server — is
// Unbounded, wherever the source hides and however its names are
// written; a server tool's max_uses bounds its rounds (and a web search
// tool's its searches), and one without max_uses is Unboundable.
func TestEstimate_Unbounded(t *testing.T) {
	c := New(Config{})
	r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
	const head = `{"model":"claude-haiku-4-5","max_tokens":100,`
	msg := func(content string) string { return head + `"messages":[{"role":"user","content":` + content + `}]}` }
	tests := []struct {
		name        string
		body        string
		unbounded   bool
		rounds      int64
		searches    int64
		unboundable bool
	}{
		{"text", msg(`"Say hello."`), false, 0, 0, false},
		{"text blocks", msg(`[{"type":"text","text":"\"source\":{\"type\":\"url\"}"}]`), false, 0, 0, false},
		{"base64 image", msg(`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]`), true, 1, 0, false},
		{"base64 PDF", msg(`[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]`), true, 1, 0, false},
		{"text document", msg(`[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}}]`), false, 0, 0, false},
		{"image by URL", msg(`[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]`), true, 1, 0, false},
		{"document by URL", msg(`[{"type":"text","text":"read"},{"type":"document","source":{"url":"https://example.com/a.pdf","type":"url"}}]`), true, 1, 0, false},
		{"file source", msg(`[{"type":"document","source":{"type":"file","file_id":"file_011"}}]`), true, 1, 0, false},
		{"source without a type", msg(`[{"type":"image","source":{"url":"https://example.com/a.png"}}]`), true, 1, 0, false},
		{"source type null after base64", msg(`[{"type":"image","source":{"type":"base64","type":null}}]`), true, 1, 0, false},
		{"either of duplicate types", msg(`[{"type":"image","source":{"type":"url","type":"base64","data":""}}]`), true, 1, 0, false},
		{"escaped key", msg(`[{"type":"image","sourc\u0065":{"typ\u0065":"\u0075rl","url":"https://example.com/a.png"}}]`), true, 1, 0, false},
		{"escaped value", msg(`[{"type":"image","source":{"type":"u\u0072l","url":"https://example.com/a.png"}}]`), true, 1, 0, false},
		{"in a tool_result", msg(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]`), true, 1, 0, false},
		{"in a document's content source", msg(`[{"type":"document","source":{"type":"content","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}}]`), true, 1, 0, false},
		{"bounded content source", msg(`[{"type":"document","source":{"type":"content","content":[{"type":"text","text":"hi"}]}}]`), false, 0, 0, false},
		{"in a later message", head + `"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, true, 1, 0, false},
		{"in system", head + `"system":[{"type":"text","text":"x"},{"type":"image","source":{"type":"url","url":"u"}}],"messages":[]}`, true, 1, 0, false},
		{"in a tool_use input", msg(`[{"type":"tool_use","id":"t","name":"n","input":{"source":{"type":"url"}}}]`), false, 0, 0, false},
		{"nested names at the top are not read", `{"source":{"type":"url"},"model":"m"}`, false, 0, 0, false},
		{"client tool", msg(`"hi"`)[:len(msg(`"hi"`))-1] + `,"tools":[{"name":"Read","input_schema":{"type":"object"}}]}`, false, 0, 0, false},
		{"custom and client-run tools", head + `"tools":[{"type":"custom","name":"a"},{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer"},{"type":"memory_20250818","name":"memory"}],"messages":[]}`, false, 0, 0, false},
		{"web search with max_uses", head + `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}],"messages":[]}`, true, 6, 5, false},
		{"web search and fetch", head + `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5},{"type":"web_fetch_20250910","name":"web_fetch","max_uses":3}],"messages":[]}`, true, 9, 5, false},
		{"web search without max_uses", head + `"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[]}`, true, 1, 0, true},
		{"either of duplicate tool types", head + `"tools":[{"type":"web_search_20250305","type":"custom","name":"web_search","max_uses":2}],"messages":[]}`, true, 3, 2, false},
		{"the most of duplicate max_uses", head + `"tools":[{"type":"web_fetch_20250910","max_uses":9,"max_uses":1}],"messages":[]}`, true, 10, 0, false},
		{"max_uses null", head + `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5,"max_uses":null}],"messages":[]}`, true, 1, 0, true},
		{"code execution", head + `"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"messages":[]}`, true, 1, 0, true},
		{"code execution with max_uses", head + `"tools":[{"type":"code_execution_20250825","name":"code_execution","max_uses":3}],"messages":[]}`, true, 4, 0, true},
		{"code execution beside an older web search", head + `"tools":[{"type":"code_execution_20250825","max_uses":3},{"type":"web_search_20250305","max_uses":2}],"messages":[]}`, true, 6, 2, true},
		{"code execution beside web search 20260209", head + `"tools":[{"type":"code_execution_20250825","max_uses":3},{"type":"web_search_20260209","max_uses":2}],"messages":[]}`, true, 6, 2, false},
		{"code execution beside web fetch 20261001", head + `"tools":[{"type":"web_fetch_20261001","max_uses":1},{"type":"code_execution_20260120","max_uses":1}],"messages":[]}`, true, 3, 0, false},
		{"code execution beside a web search of no date", head + `"tools":[{"type":"code_execution_20250825","max_uses":3},{"type":"web_search_2026x209","max_uses":2}],"messages":[]}`, true, 6, 2, true},
		{"free code execution without max_uses", head + `"tools":[{"type":"code_execution_20250825"},{"type":"web_search_20260209","max_uses":2}],"messages":[]}`, true, 3, 2, true},
		{"escaped tool type", head + `"tools":[{"t\u0079pe":"web_se\u0061rch_20250305","name":"web_search","max_uses":2}],"messages":[]}`, true, 3, 2, false},
		{"an unknown tool type", head + `"tools":[{"type":"web_browse_20270101","name":"b","max_uses":1}],"messages":[]}`, true, 2, 0, false},
		{"MCP servers", head + `"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}],"messages":[]}`, true, 1, 0, true},
		{"no MCP servers", head + `"mcp_servers":[],"messages":[]}`, false, 0, 0, false},
		{"MCP servers null", head + `"mcp_servers":null,"messages":[]}`, false, 0, 0, false},
		{"max_uses past any budget", head + `"tools":[{"type":"web_search_20250305","max_uses":9223372036854775807},{"type":"web_fetch_20250910","max_uses":9223372036854775807}],"messages":[]}`, true, 1 + 1<<30, 1 << 30, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.body)) {
				t.Fatalf("%s is not JSON: the test is wrong", tt.body)
			}
			e := c.Estimate(r, []byte(tt.body))
			if e.Unbounded != tt.unbounded || e.Rounds != tt.rounds || e.Searches != tt.searches || (e.Unboundable != "") != tt.unboundable {
				t.Errorf("Estimate(%s) = %+v, want unbounded %v, rounds %d, searches %d, unboundable %v",
					tt.body, e, tt.unbounded, tt.rounds, tt.searches, tt.unboundable)
			}
			if e.Model != "claude-haiku-4-5" && e.Model != "m" || e.MaxTokens != 100 && e.Model != "m" {
				t.Errorf("Estimate(%s) = %+v: model or max_tokens lost", tt.body, e)
			}
			if u := unboundedJSON([]byte(tt.body)); u.Unbounded && !e.Unbounded || e.Rounds < u.Rounds || e.Searches < u.Searches || u.Unboundable != "" && e.Unboundable == "" {
				t.Errorf("Estimate(%s) = %+v, under encoding/json's reading %+v", tt.body, e, u)
			}
		})
	}
}

// TestEstimate_UnreadIsUnbounded: a body not read may fetch anything.
func TestEstimate_UnreadIsUnbounded(t *testing.T) {
	r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
	if e := New(Config{}).Estimate(r, nil); !e.Unbounded {
		t.Errorf("Estimate(nil) = %+v, want Unbounded", e)
	}
}

// TestEstimate_Context1M: the anthropic-beta header's context-1m token,
// in any list and case, asks for the 1M window.
func TestEstimate_Context1M(t *testing.T) {
	tests := []struct {
		beta []string
		want bool
	}{
		{nil, false},
		{[]string{"prompt-caching-2024-07-31"}, false},
		{[]string{"context-1m-2025-08-07"}, true},
		{[]string{"files-api-2025-04-14, Context-1M-2025-08-07"}, true},
		{[]string{"files-api-2025-04-14", "context-1m-2025-08-07"}, true},
	}
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1}`)
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
		for _, v := range tt.beta {
			r.Header.Add("anthropic-beta", v)
		}
		if e := New(Config{}).Estimate(r, body); e.Context1M != tt.want {
			t.Errorf("Estimate with anthropic-beta %q: Context1M = %v, want %v", tt.beta, e.Context1M, tt.want)
		}
	}
}

// TestEstimate_Context1MInTheBody: a body's anthropic_beta, named so in
// any case, asks for the 1M window as the header does (cloud.Asked).
func TestEstimate_Context1MInTheBody(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{`{"model":"claude-sonnet-4-5","max_tokens":1,"anthropic_beta":["files-api-2025-04-14"]}`, false},
		{`{"model":"claude-sonnet-4-5","max_tokens":1,"anthropic_beta":["context-1m-2025-08-07"]}`, true},
		{`{"model":"claude-sonnet-4-5","max_tokens":1,"ANTHROPIC_BETA":["Context-1M-2025-08-07"]}`, true},
		{`{"model":"claude-sonnet-4-5","max_tokens":1,"anthropic\u005fbeta":["context-1m-2025-08-07"]}`, true},
		{`{"anthropic_beta":"context-1m-2025-08-07","model":"claude-sonnet-4-5","max_tokens":1}`, true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
		if e := New(Config{}).Estimate(r, []byte(tt.body)); e.Context1M != tt.want {
			t.Errorf("Estimate(%s): Context1M = %v, want %v", tt.body, e.Context1M, tt.want)
		}
	}
}

// unboundedJSON is what the body's API-side input is, read with
// encoding/json (names matched exactly, the last of duplicates winning)
// by Estimate's rules.
func unboundedJSON(body []byte) capability.Estimate {
	var e capability.Estimate
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil {
		return e
	}
	var fetches func(v any) bool
	fetches = func(v any) bool {
		blocks, _ := v.([]any)
		for _, b := range blocks {
			m, _ := b.(map[string]any)
			if src, ok := m["source"]; ok {
				s, isObj := src.(map[string]any)
				typ, isStr := s["type"].(string)
				switch {
				case !isObj:
				case isStr && typ == "text":
				case isStr && typ == "content":
					if fetches(s["content"]) {
						return true
					}
				default:
					return true
				}
			}
			if fetches(m["content"]) {
				return true
			}
		}
		return false
	}
	msgs, _ := doc["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		e.Unbounded = e.Unbounded || fetches(mm["content"])
	}
	e.Unbounded = e.Unbounded || fetches(doc["system"])
	var uses, searches int64
	servers := 0
	tools, _ := doc["tools"].([]any)
	for _, tl := range tools {
		m, ok := tl.(map[string]any)
		if !ok {
			continue
		}
		typ, isStr := m["type"].(string)
		if m["type"] == nil || isStr && (typ == "" || typ == "custom" || strings.HasPrefix(typ, "bash_") || strings.HasPrefix(typ, "text_editor_") ||
			strings.HasPrefix(typ, "computer_") || strings.HasPrefix(typ, "memory_")) {
			continue
		}
		servers++
		n, ok := m["max_uses"].(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || i < 0 || strings.ContainsAny(string(n), ".eE") {
			e.Unboundable = "no max_uses"
			continue
		}
		uses = min(uses+min(i, 1<<30), 1<<30)
		if strings.HasPrefix(typ, "web_search_") {
			searches = min(searches+min(i, 1<<30), 1<<30)
		}
	}
	if v, ok := doc["mcp_servers"]; ok && v != nil {
		if a, isArr := v.([]any); !isArr || len(a) > 0 {
			servers++
			e.Unboundable = "MCP servers"
		}
	}
	if e.Unbounded || servers > 0 {
		e.Unbounded, e.Rounds, e.Searches = true, 1+uses, searches
	}
	return e
}

func TestNameEscape(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{``, false},
		{`\u0073`, true},
		{`"sourc\u0065"`, true},
		{`"\u005F"`, true},
		{`\u007a`, true},
		{`\u003c\u003e\u0026`, false}, // Go's HTML escapes
		{`\u00e9\u4e2d`, false},       // Python's non-ASCII escapes
		{`u0073`, false},
		{`\u00`, false},
		{`\u007`, false},
		{`xu0073 \u0026 \u0075`, true},
	}
	for _, tt := range tests {
		if got := nameEscape(tt.s); got != tt.want {
			t.Errorf("nameEscape(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestHoldsSource(t *testing.T) {
	for _, s := range []string{``, `"`, `source`, `"source`, `source"`, `"resource"`, `"sources"`, `"so urce"`, `urce"`, `"sourc"`, `so"urce"`} {
		if got, want := holdsSource(s), strings.Contains(s, `"source"`); got != want {
			t.Errorf("holdsSource(%q) = %v, want %v", s, got, want)
		}
	}
	for _, s := range []string{`"source"`, `{"source":{}}`, `x"source"`, `"resource" "source"`, `urce" "source"`, strings.Repeat(`"resource"`, 100) + `"source"`} {
		if !holdsSource(s) {
			t.Errorf("holdsSource(%q) = false, want true", s)
		}
	}
}

// TestEstimate_Geo: a body's inference_geo (named so in any case) that is
// not null or "global" is the estimate's Geo, whichever of duplicates a
// decoder takes; a value that is not a string, or empty, is priced as
// one too. "global" is Geo only when every member says it, named
// exactly: a null, a "global" under a name the API does not read, or no
// member leaves the workspace's default geography, Geo "".
func TestEstimate_Geo(t *testing.T) {
	tests := []struct {
		geo, want string
	}{
		{``, ""},
		{`"inference_geo":null,`, ""},
		{`"inference_geo":"global",`, "global"},
		{`"inference_geo":"global","inference_geo":"global",`, "global"},
		{`"inference_geo":"global","inference_geo":null,`, ""},
		{`"inference_geo":null,"inference_geo":"global",`, ""},
		{`"Inference_Geo":"global",`, ""},
		{`"inference_geo":"global","INFERENCE_GEO":"global",`, ""},
		{`"inference_geo":"us",`, "us"},
		{`"inference_geo":"us","inference_geo":"global",`, "us"},
		{`"inference_geo":"global","inference_geo":"us",`, "us"},
		{`"Inference_Geo":"us",`, "us"},
		{`"inference\u005fgeo":"us",`, "us"},
		{`"inference_geo":"",`, "?"},
		{`"inference_geo":1,`, "?"},
		{`"inference_geo":"` + strings.Repeat("u", 100) + `",`, strings.Repeat("u", maxGeo)},
	}
	for _, tt := range tests {
		body := []byte(`{"model":"claude-opus-4-6",` + tt.geo + `"max_tokens":1}`)
		r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
		if e := New(Config{}).Estimate(r, body); e.Geo != tt.want {
			t.Errorf("Estimate of %s: Geo = %q, want %q", body, e.Geo, tt.want)
		}
	}
}

// TestEstimate_ClientToolTokens: each Anthropic-defined client tool adds
// its definition's tokens, which its few bytes of type do not bound.
func TestEstimate_ClientToolTokens(t *testing.T) {
	tests := []struct {
		tools string
		want  int64
	}{
		{`[]`, 0},
		{`[{"name":"f","input_schema":{}}]`, 0},
		{`[{"type":"custom","name":"f"}]`, 0},
		{`[{"type":"bash_20250124","name":"bash"}]`, clientToolTokens},
		{`[{"type":"computer_20250124","name":"computer"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"bash_20250124","name":"bash"}]`, 3 * clientToolTokens},
		{`[{"type":"web_search_20250305","max_uses":1},{"type":"memory_20250818","name":"memory"}]`, clientToolTokens},
	}
	for _, tt := range tests {
		body := []byte(`{"model":"claude-opus-4-6","max_tokens":1,"tools":` + tt.tools + `}`)
		r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
		if e := New(Config{}).Estimate(r, body); e.ToolTokens != tt.want {
			t.Errorf("Estimate of tools %s: ToolTokens = %d, want %d", tt.tools, e.ToolTokens, tt.want)
		}
	}
}
