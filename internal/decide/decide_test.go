package decide_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/server"
)

const apiKey = "sk-ant-api03-TESTCREDENTIAL-0123456789"

const schemaID = "https://intentius.io/chant/schemas/workspace/broker-protocol/v1/broker-protocol.schema.json"

var (
	schemaOnce sync.Once
	schemas    map[string]*jsonschema.Schema
	schemaErr  error
)

// validate checks body against a $def of broker-protocol.schema.json.
func validate(t *testing.T, def string, body []byte) {
	t.Helper()
	schemaOnce.Do(func() {
		f, err := os.Open("../../testdata/broker-protocol.schema.json")
		if err != nil {
			schemaErr = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			schemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.UseRegexpEngine(ecmaRegexp)
		if schemaErr = c.AddResource(schemaID, doc); schemaErr != nil {
			return
		}
		schemas = map[string]*jsonschema.Schema{}
		for _, d := range []string{"decideRequest", "decideResponse", "refusal"} {
			if schemas[d], schemaErr = c.Compile(schemaID + "#/$defs/" + d); schemaErr != nil {
				return
			}
		}
	})
	if schemaErr != nil {
		t.Fatalf("load schema: %v", schemaErr)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s is not JSON: %v: %s", def, err, body)
	}
	if err := schemas[def].Validate(inst); err != nil {
		t.Errorf("%s does not validate: %v\n%s", def, err, body)
	}
}

var unicodeEscape = regexp.MustCompile(`\\u([0-9a-fA-F]{4})`)

// ecmaRegexp compiles the schema's patterns, which are ECMAScript's, with
// Go's regexp: \uXXXX becomes \x{XXXX}.
func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	return regexp.Compile(unicodeEscape.ReplaceAllString(s, `\x{$1}`))
}

// setup starts a broker whose box "a" holds inference with decide, paid by
// the shared credential.
func setup(t *testing.T, opt brokertest.Options) (*brokertest.Broker, string) {
	t.Helper()
	b := brokertest.New(t, opt)
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "decide"))
	return b, token
}

func post(b *brokertest.Broker, token string, body any) brokertest.Response {
	var raw []byte
	switch v := body.(type) {
	case string:
		raw = []byte(v)
	case []byte:
		raw = v
	default:
		raw, _ = json.Marshal(v)
	}
	return b.Do("POST", protocol.RouteDecide, token, raw, nil)
}

const allTypes = `{
  "model": "claude-opus-4-1",
  "state": {"order": {"items": 3, "total": 42.5}, "note": "<b>fragile</b>"},
  "questions": {
    "tier": {"type": "choice", "instructions": "Pick the shipping tier.", "criteria": {"small": "under 2 kg", "large": "2 kg or more"}},
    "size": {"type": "choice", "instructions": "Pick the box size.", "criteria": ["S", "M", "L"]},
    "region": {"type": "choice", "instructions": "Pick the region.", "criteria": [{"name": "eu", "about": "Europe"}, {"id": "us"}]},
    "ok": {"type": "noul", "instructions": "Is the order complete?", "criteria": {}},
    "quality": {"type": "score", "instructions": "Score the packing from 1 to 5.", "criteria": {"1": "poor", "5": "perfect"}},
    "order": {"type": "rank", "instructions": "Rank the items.", "criteria": []}
  }
}`

type answer struct {
	Type          string             `json:"type"`
	Choice        *string            `json:"choice"`
	Noul          *float64           `json:"noul"`
	Score         *float64           `json:"score"`
	Probabilities map[string]float64 `json:"probabilities"`
	Confidence    *float64           `json:"confidence"`
	Reason        *string            `json:"reason"`
}

type response struct {
	Model   string            `json:"model"`
	Answers map[string]answer `json:"answers"`
	Usage   *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

func decode(t *testing.T, body []byte) response {
	t.Helper()
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, body)
	}
	return r
}

func TestDecide_AnswersEachType(t *testing.T) {
	validate(t, "decideRequest", []byte(strings.Replace(allTypes, `"rank"`, `"score"`, 1)))
	b, token := setup(t, brokertest.Options{})
	resp := post(b, token, allTypes)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	validate(t, "decideResponse", resp.Body)
	if got := resp.Header.Get("Chant-Payer"); got != "shared" {
		t.Errorf("chant-payer = %q, want shared", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("content-type = %q, want application/json", got)
	}
	r := decode(t, resp.Body)
	if r.Model != "claude-opus-4-1" {
		t.Errorf("model = %q, want the model asked", r.Model)
	}
	if len(r.Answers) != 6 {
		t.Errorf("answers = %d, want 6", len(r.Answers))
	}
	// The stand-in answers the first enum value and splits numbers evenly.
	choices := []struct {
		id      string
		choice  string
		options []string
	}{
		{"tier", "small", []string{"small", "large"}},
		{"size", "S", []string{"S", "M", "L"}},
		{"region", "eu", []string{"eu", "us"}},
	}
	for _, c := range choices {
		a := r.Answers[c.id]
		if a.Type != "choice" || a.Choice == nil || *a.Choice != c.choice {
			t.Errorf("answers[%s] = %+v, want choice %q", c.id, a, c.choice)
			continue
		}
		if len(a.Probabilities) != len(c.options) {
			t.Errorf("answers[%s].probabilities = %v, want one per option %q", c.id, a.Probabilities, c.options)
		}
		sum := 0.0
		for _, o := range c.options {
			p, ok := a.Probabilities[o]
			if !ok {
				t.Errorf("answers[%s].probabilities has no %q", c.id, o)
			}
			if math.Abs(p-1/float64(len(c.options))) > 1e-9 {
				t.Errorf("answers[%s].probabilities[%s] = %v, want %v", c.id, o, p, 1/float64(len(c.options)))
			}
			sum += p
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("answers[%s] probabilities sum to %v, want 1", c.id, sum)
		}
		if a.Confidence == nil || *a.Confidence != 1 {
			t.Errorf("answers[%s].confidence = %v, want 1", c.id, a.Confidence)
		}
		if a.Reason == nil || *a.Reason != "stand-in" {
			t.Errorf("answers[%s].reason = %v, want the model's", c.id, a.Reason)
		}
	}
	if a := r.Answers["ok"]; a.Type != "noul" || a.Noul == nil || *a.Noul != 1 || a.Reason == nil {
		t.Errorf("answers[ok] = %+v, want noul 1 with a reason", a)
	}
	if a := r.Answers["quality"]; a.Type != "score" || a.Score == nil || *a.Score != 0.5 || a.Confidence == nil || *a.Confidence != 0.5 {
		t.Errorf("answers[quality] = %+v, want score 0.5, confidence 0.5", a)
	}
	if a := r.Answers["order"]; a.Type != "unsupported" || a.Choice != nil || a.Reason != nil {
		t.Errorf("answers[order] = %+v, want unsupported", a)
	}
	if r.Usage == nil || r.Usage.InputTokens != 5*12 || r.Usage.OutputTokens != 5*6 {
		t.Errorf("usage = %+v, want the sum of 5 calls", r.Usage)
	}

	seen := b.Upstream.Seen()
	if len(seen) != 5 {
		t.Fatalf("upstream saw %d requests, want 5 (the unsupported question is not asked)", len(seen))
	}
	for _, s := range seen {
		if s.Method != "POST" || s.Path != "/v1/messages" || s.RawQuery != "" {
			t.Errorf("upstream got %s %s?%s, want POST /v1/messages", s.Method, s.Path, s.RawQuery)
		}
		if s.Header.Get("X-Api-Key") != apiKey || s.Header.Get("Authorization") != "" {
			t.Errorf("upstream credential headers: x-api-key %q, authorization %q", s.Header.Get("X-Api-Key"), s.Header.Get("Authorization"))
		}
		if got := s.Header.Get("Anthropic-Version"); got != "2023-06-01" {
			t.Errorf("upstream anthropic-version = %q, want 2023-06-01", got)
		}
		assertNoToken(t, s, token)
		var m struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			Messages  []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			OutputConfig struct {
				Format struct {
					Type   string `json:"type"`
					Schema struct {
						Properties map[string]struct {
							Enum []string `json:"enum"`
						} `json:"properties"`
						Required []string `json:"required"`
					} `json:"schema"`
				} `json:"format"`
			} `json:"output_config"`
		}
		if err := json.Unmarshal(s.Body, &m); err != nil {
			t.Fatalf("upstream body is not JSON: %v", err)
		}
		if m.Model != "claude-opus-4-1" || m.MaxTokens <= 0 || len(m.Messages) != 1 || m.OutputConfig.Format.Type != "json_schema" {
			t.Errorf("upstream body = %s, want a structured-output Messages call to the model asked", s.Body)
			continue
		}
		content := m.Messages[0].Content
		if !strings.Contains(content, `"fragile"`) && !strings.Contains(content, "fragile") || !strings.Contains(content, `"total": 42.5`) {
			t.Errorf("prompt does not lay out the state:\n%s", content)
		}
		if strings.Contains(content, "Pick the shipping tier.") {
			if !strings.Contains(content, "under 2 kg") {
				t.Errorf("prompt does not lay out the criteria:\n%s", content)
			}
			got := m.OutputConfig.Format.Schema.Properties["choice"].Enum
			if strings.Join(got, ",") != "small,large" {
				t.Errorf("tier schema's choice enum = %q, want the criteria's keys in order", got)
			}
			if strings.Join(m.OutputConfig.Format.Schema.Required, ",") != "reason,probabilities,choice,confidence" {
				t.Errorf("tier schema requires %q", m.OutputConfig.Format.Schema.Required)
			}
		}
	}
}

func assertNoToken(t *testing.T, s brokertest.Seen, token string) {
	t.Helper()
	var all bytes.Buffer
	_ = s.Header.Write(&all)
	all.WriteString(s.Path + "?" + s.RawQuery)
	all.Write(s.Body)
	if bytes.Contains(all.Bytes(), []byte(token)) {
		t.Errorf("upstream received the box's token")
	}
}

// TestDecide_TokenInStateNeverReachesUpstream: a box that puts its own
// token in the state or the instructions still sends no token upstream.
func TestDecide_TokenInStateNeverReachesUpstream(t *testing.T) {
	b, token := setup(t, brokertest.Options{})
	body, _ := json.Marshal(map[string]any{
		"model": "m", "state": map[string]any{"env": "TOKEN=" + token},
		"questions": map[string]any{"q": map[string]any{"type": "noul", "instructions": "Is " + token + " set?", "criteria": map[string]any{}}},
	})
	resp := post(b, token, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	seen := b.Upstream.Seen()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(seen))
	}
	assertNoToken(t, seen[0], token)
	if !bytes.Contains(seen[0].Body, []byte(proxy.TokenMarkerPrefix)) {
		t.Errorf("upstream body does not hold the token's stand-in: %s", seen[0].Body)
	}
}

func TestDecide_SetupTokenAsBearerWithBeta(t *testing.T) {
	const setupToken = "sk-ant-oat01-TESTSETUPTOKEN"
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", setupToken)
	b.Report(token, brokertest.Entry("inference", "decide"))
	resp := post(b, token, `{"model":"m","state":null,"questions":{"q":{"type":"noul","instructions":"Yes?","criteria":{}}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	s := b.Upstream.Seen()[0]
	if got := s.Header.Get("Authorization"); got != "Bearer "+setupToken {
		t.Errorf("upstream authorization = %q, want the setup token as bearer", got)
	}
	if got := s.Header.Get("Anthropic-Beta"); got != proxy.OAuthBeta {
		t.Errorf("upstream anthropic-beta = %q, want %q", got, proxy.OAuthBeta)
	}
	if s.Header.Get("X-Api-Key") != "" {
		t.Errorf("upstream received x-api-key %q", s.Header.Get("X-Api-Key"))
	}
	assertNoToken(t, s, token)
}

// scripted is an upstream whose answer a test sets.
type scripted struct {
	mu     sync.Mutex // guards status and body
	status int
	body   string
}

func (s *scripted) set(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status, body := s.status, s.body
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// message is a Messages answer whose first text block is text.
func message(text string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": "end_turn", "usage": map[string]any{"input_tokens": 3, "output_tokens": 4},
	})
	return string(b)
}

func TestDecide_ReadsTheModelsAnswer(t *testing.T) {
	up := &scripted{}
	rec := &brokertest.Recorder{Handler: up}
	b, token := setup(t, brokertest.Options{Anthropic: rec})
	choice := `{"model":"m","state":{},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":{"a":"A","b":"B"}}}}`
	noul := `{"model":"m","state":{},"questions":{"q":{"type":"noul","instructions":"Yes?","criteria":{}}}}`
	score := `{"model":"m","state":{},"questions":{"q":{"type":"score","instructions":"Score.","criteria":[]}}}`
	tests := []struct {
		name     string
		request  string
		upstream string
		want     string // the answer to q, as JSON; "" for a 502
		wantMsg  string // in the 502's message
	}{
		{"choice normalised and clamped", choice, message(`{"reason":"because","probabilities":{"a":2,"b":6},"choice":"b","confidence":1.7}`),
			`{"type":"choice","choice":"b","probabilities":{"a":0.25,"b":0.75},"confidence":1,"reason":"because"}`, ""},
		{"negative probability is zero", choice, message(`{"reason":"","probabilities":{"a":-1,"b":0.5},"choice":"b","confidence":-2}`),
			`{"type":"choice","choice":"b","probabilities":{"a":0,"b":1},"confidence":0}`, ""},
		{"extra probabilities ignored", choice, message(`{"reason":" ","probabilities":{"a":1,"b":1,"z":9},"choice":"a","confidence":0.5}`),
			`{"type":"choice","choice":"a","probabilities":{"a":0.5,"b":0.5},"confidence":0.5}`, ""},
		{"noul clamped low", noul, message(`{"reason":"no","noul":-0.2}`), `{"type":"noul","noul":0,"reason":"no"}`, ""},
		{"noul clamped high", noul, message(`{"noul":1.5}`), `{"type":"noul","noul":1}`, ""},
		{"score as given", score, message(`{"reason":"ok","score":4,"confidence":0.8}`), `{"type":"score","score":4,"confidence":0.8,"reason":"ok"}`, ""},
		{"choice not an option", choice, message(`{"reason":"r","probabilities":{"a":1,"b":0},"choice":"c","confidence":1}`), "", `chose "c", which is not one of the options`},
		{"no choice", choice, message(`{"reason":"r","probabilities":{"a":1,"b":0},"confidence":1}`), "", "gives no choice"},
		{"no probabilities", choice, message(`{"choice":"a","confidence":1}`), "", "gives no probabilities"},
		{"a probability missing", choice, message(`{"choice":"a","probabilities":{"a":1},"confidence":1}`), "", `no probability for option "b"`},
		{"probabilities all zero", choice, message(`{"choice":"a","probabilities":{"a":0,"b":0},"confidence":1}`), "", "do not sum to more than zero"},
		{"no confidence", choice, message(`{"choice":"a","probabilities":{"a":1,"b":0}}`), "", "gives no confidence"},
		{"a probability a string", choice, message(`{"choice":"a","probabilities":{"a":"1","b":0},"confidence":1}`), "", "not a JSON object of the form asked"},
		{"no noul", noul, message(`{"reason":"r"}`), "", "gives no noul"},
		{"no score", score, message(`{"reason":"r"}`), "", "gives no score"},
		{"text not JSON", noul, message(`Sure! The answer is yes.`), "", "not a JSON object"},
		{"two JSON values", noul, message(`{"noul":1} {"noul":0}`), "", "more than one JSON value"},
		{"garbage body", noul, `<html>oops</html>`, "", "is not a message"},
		{"no text block", noul, `{"type":"message","content":[{"type":"tool_use","id":"t","name":"x","input":{}}],"stop_reason":"tool_use"}`, "", "holds no text"},
		{"cut off", noul, `{"type":"message","content":[{"type":"text","text":"{\"noul\":"}],"stop_reason":"max_tokens"}`, "", "cut off at max_tokens"},
		{"refused", noul, `{"type":"message","content":[{"type":"text","text":"{\"noul\":1}"}],"stop_reason":"refusal"}`, "", "declined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.set(200, tt.upstream)
			resp := post(b, token, tt.request)
			if resp.Header.Get("Chant-Payer") != "shared" {
				t.Errorf("chant-payer = %q, want shared", resp.Header.Get("Chant-Payer"))
			}
			if tt.want == "" {
				_, msg := brokertest.Refusal(resp.Body)
				if resp.StatusCode != 502 || !strings.Contains(msg, tt.wantMsg) {
					t.Fatalf("answer = %d %s, want 502 saying %q", resp.StatusCode, resp.Body, tt.wantMsg)
				}
				validate(t, "refusal", resp.Body)
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			validate(t, "decideResponse", resp.Body)
			var got struct {
				Answers map[string]json.RawMessage `json:"answers"`
			}
			_ = json.Unmarshal(resp.Body, &got)
			if !jsonEqual(got.Answers["q"], []byte(tt.want)) {
				t.Errorf("answers[q] = %s, want %s", got.Answers["q"], tt.want)
			}
		})
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func TestDecide_Invalid(t *testing.T) {
	b, token := setup(t, brokertest.Options{})
	q := func(question string) string {
		return `{"model":"m","state":{},"questions":{"q":` + question + `}}`
	}
	many := map[string]any{}
	for i := 0; i < 65; i++ {
		many[strings.Repeat("q", i+1)] = map[string]any{"type": "noul", "instructions": "?", "criteria": map[string]any{}}
	}
	tests := []struct {
		name string
		body any
		want string
	}{
		{"empty body", "", "is empty"},
		{"not JSON", "model=m", "is not JSON: syntax error at byte 1"},
		{"cut short", `{"model":"m"`, "is not JSON: it ends before its value does"},
		{"trailing garbage", `{"model":"m","state":{},"questions":{}} x`, "is not JSON"},
		{"an array", `[1,2]`, "must be a JSON object with model, state and questions, not an array"},
		{"no model", `{"state":{},"questions":{"q":{"type":"noul","instructions":"?","criteria":{}}}}`, `has no "model"`},
		{"empty model", `{"model":"","state":{},"questions":{"q":{"type":"noul","instructions":"?","criteria":{}}}}`, `"model" is empty`},
		{"model a number", `{"model":4,"state":{},"questions":{"q":{"type":"noul","instructions":"?","criteria":{}}}}`, `"model" must be a string naming a model, not a number`},
		{"no state", `{"model":"m","questions":{"q":{"type":"noul","instructions":"?","criteria":{}}}}`, `has no "state"`},
		{"no questions", `{"model":"m","state":{}}`, `has no "questions"`},
		{"questions an array", `{"model":"m","state":{},"questions":[{"type":"noul","instructions":"?","criteria":{}}]}`, `"questions" must be an object of questions by id, not an array`},
		{"questions null", `{"model":"m","state":{},"questions":null}`, `not null`},
		{"no question", `{"model":"m","state":{},"questions":{}}`, `"questions" is empty`},
		{"too many questions", map[string]any{"model": "m", "state": nil, "questions": many}, "holds 65 questions; the broker answers at most 64"},
		{"a key twice", `{"model":"m","model":"n","state":{},"questions":{"q":{"type":"noul","instructions":"?","criteria":{}}}}`, `gives the key "model" twice`},
		{"a question twice", `{"model":"m","state":{},"questions":{"q":{"type":"noul","instructions":"?","criteria":{}},"q":{"type":"noul","instructions":"?","criteria":{}}}}`, `gives the key "q" twice`},
		{"question a string", q(`"yes?"`), `Question "q" must be an object with type, instructions and criteria, not a string`},
		{"no type", q(`{"instructions":"?","criteria":{}}`), `Question "q" has no "type"`},
		{"type a number", q(`{"type":1,"instructions":"?","criteria":{}}`), `"type" must be a string (noul, choice or score), not a number`},
		{"empty type", q(`{"type":"","instructions":"?","criteria":{}}`), `"type" is empty`},
		{"no instructions", q(`{"type":"noul","criteria":{}}`), `Question "q" has no "instructions"`},
		{"instructions an object", q(`{"type":"noul","instructions":{},"criteria":{}}`), `"instructions" must be a string, not an object`},
		{"no criteria", q(`{"type":"noul","instructions":"?"}`), `Question "q" has no "criteria"`},
		{"criteria a string", q(`{"type":"noul","instructions":"?","criteria":"big"}`), `"criteria" must be an object or an array, not a string`},
		{"criteria null", q(`{"type":"score","instructions":"?","criteria":null}`), `"criteria" must be an object or an array, not null`},
		{"unknown type, criteria a number", q(`{"type":"rank","instructions":"?","criteria":3}`), `not a number`},
		{"choice with no options", q(`{"type":"choice","instructions":"?","criteria":{}}`), `is a choice with no options`},
		{"choice with an empty list", q(`{"type":"choice","instructions":"?","criteria":[]}`), `is a choice with no options`},
		{"choice item a number", q(`{"type":"choice","instructions":"?","criteria":["a",2]}`), `criteria item 1 is neither a string nor an object with a string "name" or "id"`},
		{"choice item without name", q(`{"type":"choice","instructions":"?","criteria":[{"label":"a"}]}`), `criteria item 0 is neither`},
		{"choice option twice", q(`{"type":"choice","instructions":"?","criteria":["a",{"name":"a"}]}`), `names option "a" twice`},
		{"choice empty option", q(`{"type":"choice","instructions":"?","criteria":{"":"nothing"}}`), `an option with an empty name`},
		{"over the size bound", `{"model":"m","state":"` + strings.Repeat("x", 256<<10) + `","questions":{}}`, "is over 262144 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(b.Upstream.Seen())
			resp := post(b, token, tt.body)
			typ, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(msg, tt.want) {
				t.Errorf("POST decide = %d %s %q, want 422 saying %q", resp.StatusCode, typ, msg, tt.want)
			}
			validate(t, "refusal", resp.Body)
			if resp.Header.Get("Chant-Payer") != "shared" {
				t.Errorf("chant-payer = %q, want shared", resp.Header.Get("Chant-Payer"))
			}
			if n := len(b.Upstream.Seen()) - before; n != 0 {
				t.Errorf("upstream saw %d requests, want none", n)
			}
		})
	}
}

func TestDecide_RefusedWithoutDecide(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.SetCredential("anthropic", apiKey)
	agentOnly := b.AddBox("a")
	b.Report(agentOnly, brokertest.Entry("inference", "agent"))
	never := b.AddBox("b")
	tests := []struct {
		name, token string
	}{
		{"inference without decide", agentOnly},
		{"never reported", never},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A malformed request is refused by the rule first: the rule runs before the body is read.
			for _, body := range []string{allTypes, `{"model":"m","state":{},"questions":{}}`} {
				resp := post(b, tt.token, body)
				_, msg := brokertest.Refusal(resp.Body)
				if resp.StatusCode != 403 || !strings.Contains(msg, "inference") || !strings.Contains(msg, "decide") {
					t.Errorf("POST decide = %d %q, want 403 naming inference and decide", resp.StatusCode, msg)
				}
			}
		})
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("upstream saw %d requests, want none", n)
	}
}

func TestDecide_UnknownToken(t *testing.T) {
	b, _ := setup(t, brokertest.Options{})
	tests := []struct {
		name   string
		header http.Header
	}{
		{"unknown bearer", http.Header{"Authorization": {"Bearer bbx_notabox"}}},
		{"unknown x-api-key", http.Header{"X-Api-Key": {"bbx_notabox"}}},
		{"no token", http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Do("POST", protocol.RouteDecide, "", []byte(allTypes), tt.header)
			if resp.StatusCode != 401 && resp.StatusCode != 403 {
				t.Errorf("POST decide = %d %s, want 401 or 403", resp.StatusCode, resp.Body)
			}
		})
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("upstream saw %d requests, want none", n)
	}
}

func TestDecide_OtherRoutesNotServed(t *testing.T) {
	b, token := setup(t, brokertest.Options{})
	tests := []struct {
		method, path string
		status       int
	}{
		{"PUT", "/decide/v1/systemone", 405},
		{"GET", "/decide/v1/systemone", 405},
		{"POST", "/decide/v1/systemone/", 404},
		{"POST", "/decide/v2/systemone", 404},
		{"POST", "/decide", 404},
		{"POST", "/decide/v1/messages", 404},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp := b.Do(tt.method, tt.path, token, []byte(allTypes), nil)
			if resp.StatusCode != tt.status {
				t.Errorf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, resp.Body, tt.status)
			}
			if tt.status == 405 && resp.Header.Get("Allow") != "POST" {
				t.Errorf("%s %s: Allow %q, want POST", tt.method, tt.path, resp.Header.Get("Allow"))
			}
		})
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("upstream saw %d requests, want none", n)
	}
}

func TestDecide_NoCredential(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.Report(token, brokertest.Entry("inference", "decide"))
	resp := post(b, token, allTypes)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(msg, "no Anthropic credential") {
		t.Errorf("POST decide = %d %q, want 403 saying there is no credential", resp.StatusCode, msg)
	}
	if resp.Header.Get("Chant-Payer") != "shared" {
		t.Errorf("chant-payer = %q, want shared", resp.Header.Get("Chant-Payer"))
	}
	// A request that asks the model nothing needs no credential.
	resp = post(b, token, `{"model":"m","state":{},"questions":{"r":{"type":"rank","instructions":"?","criteria":[]}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("unsupported-only POST decide = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	validate(t, "decideResponse", resp.Body)
	if r := decode(t, resp.Body); r.Answers["r"].Type != "unsupported" || r.Usage != nil {
		t.Errorf("answer = %s, want r unsupported and no usage", resp.Body)
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("upstream saw %d requests, want none", n)
	}
}

// TestDecide_UpstreamErrorBodyNotEchoed: an upstream error is passed on
// as its status and error type, never its body, which could hold the
// credential or anything else.
func TestDecide_UpstreamErrorBodyNotEchoed(t *testing.T) {
	up := &scripted{}
	b, token := setup(t, brokertest.Options{Anthropic: &brokertest.Recorder{Handler: up}})
	leaky := func(typ string) string {
		return `{"type":"error","error":{"type":"` + typ + `","message":"key ` + apiKey + ` SECRET-UPSTREAM-DETAIL"}}`
	}
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"500", 500, leaky("api_error"), "with 500 Internal Server Error (api_error)"},
		{"401", 401, leaky("authentication_error"), "with 401 Unauthorized (authentication_error)"},
		{"429", 429, leaky("rate_limit_error"), "with 429 Too Many Requests (rate_limit_error)"},
		{"529", 529, leaky("overloaded_error"), "with 529  (overloaded_error)"},
		{"a redirect is not followed", 307, `{}`, "with 307 Temporary Redirect"},
		{"an error type that is no type", 400, `{"type":"error","error":{"type":"` + apiKey + `"}}`, "with 400 Bad Request."},
		{"html", 502, `<html>` + apiKey + `</html>`, "with 502 Bad Gateway."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.set(tt.status, tt.body)
			resp := post(b, token, allTypes)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != 502 || !strings.Contains(msg, tt.want) {
				t.Errorf("POST decide = %d %q, want 502 saying %q", resp.StatusCode, msg, tt.want)
			}
			if bytes.Contains(resp.Body, []byte(apiKey)) || bytes.Contains(resp.Body, []byte("SECRET-UPSTREAM-DETAIL")) {
				t.Errorf("answer echoes the upstream's body: %s", resp.Body)
			}
			for k, vs := range resp.Header {
				if strings.Contains(strings.Join(vs, " "), apiKey) {
					t.Errorf("answer header %s carries the credential", k)
				}
			}
			if resp.Header.Get("Chant-Payer") != "shared" {
				t.Errorf("chant-payer = %q, want shared", resp.Header.Get("Chant-Payer"))
			}
		})
	}
}

func TestDecide_UpstreamUnreachable(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	u := gone.URL
	gone.Close()
	b, token := setup(t, brokertest.Options{Config: func(c *server.Config) {
		c.AnthropicURL, _ = c.AnthropicURL.Parse(u)
	}})
	resp := post(b, token, allTypes)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 502 || !strings.Contains(msg, "Anthropic API") {
		t.Errorf("POST decide = %d %q, want 502 naming the Anthropic API", resp.StatusCode, msg)
	}
	if resp.Header.Get("Chant-Payer") != "shared" {
		t.Errorf("chant-payer = %q, want shared", resp.Header.Get("Chant-Payer"))
	}
}

func TestDecide_UpstreamTimeout(t *testing.T) {
	stuck := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the broker hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	b, token := setup(t, brokertest.Options{
		Anthropic: stuck,
		Config:    func(c *server.Config) { c.DecideTimeout = 200 * time.Millisecond },
	})
	resp := post(b, token, allTypes)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 504 || !strings.Contains(msg, "did not answer question") || !strings.Contains(msg, "200ms") {
		t.Errorf("POST decide = %d %q, want 504 saying the API did not answer within 200ms", resp.StatusCode, msg)
	}
	if resp.Header.Get("Chant-Payer") != "shared" {
		t.Errorf("chant-payer = %q, want shared", resp.Header.Get("Chant-Payer"))
	}
}

// barrier holds every request until want requests are in flight at once,
// and records the most in flight. A broker that asks one question at a
// time never fills it, and waits out the fallback instead.
type barrier struct {
	want     int
	mu       sync.Mutex // guards inFlight, most and full's closing
	inFlight int
	most     int
	full     chan struct{}
	closed   bool
}

func newBarrier(want int) *barrier { return &barrier{want: want, full: make(chan struct{})} }

func (b *barrier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.inFlight++
	b.most = max(b.most, b.inFlight)
	if b.inFlight >= b.want && !b.closed {
		close(b.full)
		b.closed = true
	}
	b.mu.Unlock()
	select {
	case <-b.full:
	case <-time.After(3 * time.Second):
	case <-r.Context().Done():
	}
	brokertest.AnthropicStandIn(w, r)
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
}

func questions(n int) []byte {
	qs := map[string]any{}
	for i := 0; i < n; i++ {
		qs[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = map[string]any{
			"type": "choice", "instructions": "Pick one.", "criteria": map[string]any{"yes": "y", "no": "n"},
		}
	}
	b, _ := json.Marshal(map[string]any{"model": "claude-haiku-4-5", "state": map[string]any{"n": n}, "questions": qs})
	return b
}

func TestDecide_AsksConcurrentlyWithABound(t *testing.T) {
	tests := []struct {
		name      string
		questions int
	}{
		{"8 questions all at once", 8},
		{"20 questions at most 8 at once", 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bar := newBarrier(8)
			b, token := setup(t, brokertest.Options{Anthropic: bar})
			resp := post(b, token, questions(tt.questions))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			if r := decode(t, resp.Body); len(r.Answers) != tt.questions {
				t.Errorf("answers = %d, want %d", len(r.Answers), tt.questions)
			}
			bar.mu.Lock()
			most := bar.most
			bar.mu.Unlock()
			if most != 8 {
				t.Errorf("most questions in flight = %d, want 8", most)
			}
		})
	}
}

// latency answers like the stand-in after a fixed delay.
func latency(d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		brokertest.AnthropicStandIn(w, r)
	})
}

// timeDecide returns how long one request with n questions takes on
// average over rounds.
func timeDecide(tb testing.TB, b *brokertest.Broker, token string, n, rounds int) time.Duration {
	tb.Helper()
	body := questions(n)
	start := time.Now()
	for i := 0; i < rounds; i++ {
		resp := b.Do("POST", protocol.RouteDecide, token, body, nil)
		if resp.StatusCode != 200 {
			tb.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
	}
	return time.Since(start) / time.Duration(rounds)
}

// BenchmarkDecide8Questions times a request with 8 questions against an
// upstream with 50 ms latency, and reports it as a fraction of asking
// them one after another (8 × a one-question request, measured first in
// the same run): about 1/8 when they are asked at once. The time is
// measured here, never asserted in a test; TestDecide_AsksConcurrentlyWithABound
// proves the questions are asked at once by holding them until all 8 are
// in flight.
func BenchmarkDecide8Questions(b *testing.B) {
	br := brokertest.New(b, brokertest.Options{Anthropic: latency(50 * time.Millisecond)})
	token := br.AddBox("a")
	br.SetCredential("anthropic", apiKey)
	br.Report(token, brokertest.Entry("inference", "decide"))
	one := timeDecide(b, br, token, 1, 5)
	body := questions(8)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		resp := br.Do("POST", protocol.RouteDecide, token, body, nil)
		if resp.StatusCode != 200 {
			b.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
	}
	eight := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(eight)/float64(8*one), "of-sequential")
	b.ReportMetric(float64(one.Microseconds())/1000, "ms-one-question")
}

// TestDecide_NestedStateIsNotBlownUpForTheModel: the state (and a
// question's criteria) are laid out indented for the model, two spaces a
// level. A box sends a state of a few thousand nested arrays, a few KiB:
// indented, each level's line carries its depth in spaces, and the
// prompt grows with the square of the depth (to tens of megabytes),
// made in the broker's memory for each of up to 64 questions and sent
// on the operator's key, far past what the spend meter reserved from the
// body's size. What the model is sent stays within a few times the
// request.
func TestDecide_NestedStateIsNotBlownUpForTheModel(t *testing.T) {
	b, token := setup(t, brokertest.Options{})
	const depth = 4000
	nested := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	body := []byte(`{"model":"m","state":` + nested + `,"questions":{"q":{"type":"noul","instructions":"Is it?","criteria":` + nested + `}}}`)
	resp := post(b, token, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %.300s", resp.StatusCode, resp.Body)
	}
	seen := b.Upstream.Seen()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(seen))
	}
	if n, bound := len(seen[0].Body), 4*len(body)+16<<10; n > bound {
		t.Errorf("the model was sent %d bytes for a request of %d, want at most %d", n, len(body), bound)
	}
}

// TestDecide_UpstreamDownNamesEntry: a question whose pool entry's URL
// refuses connections is logged naming the entry ("default" for the
// shared credential on the Anthropic URL), never its key.
func TestDecide_UpstreamDownNamesEntry(t *testing.T) {
	addr := refusingAddr(t)
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) { c.AnthropicURL.Host = addr }})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "decide"))
	resp := post(b, token, allTypes)
	if resp.StatusCode != 502 {
		t.Fatalf("POST decide = %d %s, want 502", resp.StatusCode, resp.Body)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "connection refused") {
			line = l
		}
	}
	if !strings.Contains(line, "pool entry default") {
		t.Errorf("the failure's log line names no entry: %s", line)
	}
	if strings.Contains(logs.String(), apiKey) {
		t.Errorf("the logs hold the key")
	}
}

// TestDecide_UpstreamDownLoggedAsInferenceLogsIt: a model call whose
// upstream refuses the connection is one event, whichever capability
// met it: decide's failure is logged at the level inference's is
// (WARN: an upstream's failure, not the broker's own). On the code
// before, decide's was an ERROR line.
func TestDecide_UpstreamDownLoggedAsInferenceLogsIt(t *testing.T) {
	addr := refusingAddr(t)
	tests := []struct {
		name, path, body string
		word             string
	}{
		{"inference", "/llm/anthropic/v1/messages", `{"model":"claude-opus-4-1","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "agent"},
		{"decide", protocol.RouteDecide, allTypes, "decide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &brokertest.Buffer{}
			b := brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) { c.AnthropicURL.Host = addr }})
			token := b.AddBox("a")
			b.SetCredential("anthropic", apiKey)
			b.Report(token, brokertest.Entry("inference", tt.word))
			if resp := b.Do("POST", tt.path, token, []byte(tt.body), nil); resp.StatusCode != 502 {
				t.Fatalf("POST %s = %d %s, want 502", tt.path, resp.StatusCode, resp.Body)
			}
			var levels []string
			for _, l := range strings.Split(logs.String(), "\n") {
				var rec struct {
					Level string `json:"level"`
				}
				if strings.Contains(l, "connection refused") && json.Unmarshal([]byte(l), &rec) == nil {
					levels = append(levels, rec.Level)
				}
			}
			if len(levels) == 0 || slices.ContainsFunc(levels, func(l string) bool { return l != "WARN" }) {
				t.Errorf("the upstream's failure is logged at %v, want WARN", levels)
			}
		})
	}
}

// refusingAddr is an address on loopback where nothing listens: a
// connection there is refused.
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	return addr
}
