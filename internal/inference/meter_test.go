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
			if e != (capability.Estimate{Calls: 1}) {
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
		if !got.foldModel && !got.foldMax && e != old {
			t.Errorf("Estimate(%q) = %+v, from encoding/json %+v", body, e, old)
		}
		if output(e, 64000) < output(old, 64000) || e.Model != old.Model && e.Model != "" {
			t.Errorf("Estimate(%q) = %+v, under encoding/json's %+v", body, e, old)
		}
	})
}
