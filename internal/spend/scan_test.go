package spend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// requestFields is what a scanner read of a Messages body, for comparing.
type requestFields struct {
	ok                  bool
	model               string
	modelSet, modelLong bool
	maxTokens           int64
	maxSet              bool
	foldModel, foldMax  bool
	top                 int64
	topSet              bool
}

// scanRequest scans body in pieces of n bytes (all at once when n <= 0).
func scanRequest(body []byte, n int) requestFields {
	var s scanner
	s.reset(requestSchema)
	if n <= 0 {
		n = len(body)
	}
	for p := body; len(p) > 0; {
		k := min(n, len(p))
		s.write(p[:k])
		p = p[k:]
	}
	f := requestFields{ok: s.close()}
	m, mt := s.slots[reqModel], s.slots[reqMaxTokens]
	f.model, _ = s.text(reqModel)
	f.modelSet, f.modelLong, f.foldModel = m.set, m.long, m.fold
	f.maxTokens, f.maxSet, f.foldMax, f.top, f.topSet = mt.n, mt.set, mt.fold, mt.top, mt.topSet
	if !f.maxSet {
		f.maxTokens = 0
	}
	return f
}

// estimateJSON is EstimateMessages as it was before the scanner: the
// body's fields as json.Unmarshal reads them.
func estimateJSON(body []byte, n, maxTokens int64) Estimate {
	est := Estimate{Calls: 1, Input: inputBound(n), Output: maxTokens}
	var req struct {
		Model     string `json:"model"`
		MaxTokens *int64 `json:"max_tokens"`
	}
	if json.Unmarshal(body, &req) == nil {
		est.Model = req.Model
		if req.MaxTokens != nil && *req.MaxTokens >= 0 {
			est.Output = *req.MaxTokens
		}
	}
	return est
}

func TestScanner_Request(t *testing.T) {
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
			for _, n := range []int{0, 1, 2, 3, 7, 64} {
				got := scanRequest([]byte(tt.body), n)
				if got.ok != tt.ok {
					t.Fatalf("scan(%.40q) in pieces of %d: ok = %v, want %v", tt.body, n, got.ok, tt.ok)
				}
				if !tt.ok {
					continue
				}
				if got.model != tt.model || got.maxSet != (tt.maxTokens != unread) || got.maxSet && got.maxTokens != tt.maxTokens {
					t.Errorf("scan(%.40q) in pieces of %d = %+v, want model %q, max_tokens %d", tt.body, n, got, tt.model, tt.maxTokens)
				}
			}
		})
	}
}

// TestEstimateMessages_CaseFoldedNamesNeverLower: encoding/json reads
// "MAX_TOKENS" and "Model" as max_tokens and model; the scanner reads
// names exactly, and takes the safe side when a body has such a name.
func TestEstimateMessages_CaseFoldedNamesNeverLower(t *testing.T) {
	m, err := New(Config{Store: noStore{}})
	if err != nil {
		t.Fatal(err)
	}
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
			got := EstimateMessages([]byte(tt.body), int64(len(tt.body)), 64000)
			if got.Model != tt.model || got.Output != tt.out {
				t.Errorf("EstimateMessages(%s) = model %q output %d, want %q, %d", tt.body, got.Model, got.Output, tt.model, tt.out)
			}
			old := estimateJSON([]byte(tt.body), int64(len(tt.body)), 64000)
			if m.Bound(got) < m.Bound(old) {
				t.Errorf("EstimateMessages(%s) bound %d, under encoding/json's %d", tt.body, m.Bound(got), m.Bound(old))
			}
		})
	}
}

// TestSchemas: every schema fits the scanner's bounds.
func TestSchemas(t *testing.T) {
	for name, sch := range map[string][]member{"request": requestSchema, "answer": answerSchema, "event": eventSchema} {
		if len(sch) > maxMembers {
			t.Errorf("%s schema: %d members, over %d", name, len(sch), maxMembers)
		}
		depth := make([]int, len(sch))
		for i, m := range sch {
			depth[i] = 2 // a member of the top-level object, at depth 1, holds an object at depth 2
			if m.parent != parentTop {
				if int(m.parent) >= i || sch[m.parent].kind != kindObject {
					t.Errorf("%s schema: %s's parent %d is not an object before it", name, m.name, m.parent)
					continue
				}
				depth[i] = depth[m.parent] + 1
			}
			if m.kind == kindObject && depth[i] > maxTrack {
				t.Errorf("%s schema: %s's object is at depth %d, past %d", name, m.name, depth[i], maxTrack)
			}
			if 6*len(m.name) > maxKey {
				t.Errorf("%s schema: %s is too long to be kept escaped", name, m.name)
			}
			if m.kind == kindString && (m.buf < 0 || m.buf >= maxStrings) {
				t.Errorf("%s schema: %s's buffer %d", name, m.name, m.buf)
			}
			for _, o := range sch[:i] {
				if o.parent == m.parent && o.name == m.name {
					t.Errorf("%s schema: %s twice", name, m.name)
				}
				if o.kind == kindString && m.kind == kindString && o.buf == m.buf {
					t.Errorf("%s schema: %s and %s share a buffer", name, o.name, m.name)
				}
			}
		}
	}
}

func TestScanner_LongModelNotKept(t *testing.T) {
	long := strings.Repeat("m", maxString+1)
	got := scanRequest([]byte(`{"model":"`+long+`","max_tokens":3}`), 5)
	if !got.ok || got.model != "" || !got.modelLong || got.maxTokens != 3 {
		t.Errorf("scan of a %d-byte model = %+v, want ok, no model, long, max_tokens 3", len(long), got)
	}
	got = scanRequest([]byte(`{"model":"`+long+`","model":"short"}`), 5)
	if !got.ok || got.model != "short" {
		t.Errorf("scan of a long model then a short one = %+v, want the short one", got)
	}
}

func TestPlainRun(t *testing.T) {
	for n := 0; n < 100; n++ {
		for _, stop := range []byte{'"', '\\', 0, 0x1f} {
			p := []byte(strings.Repeat("a\x7f\x80\xff ", 20)[:n] + string(stop) + "\"zz" + strings.Repeat("a", 40))
			if got := plainRun(p); got != n {
				t.Errorf("plainRun(%q) = %d, want %d", p, got, n)
			}
		}
		if got := plainRun([]byte(strings.Repeat("é", 50)[:n])); got != n {
			t.Errorf("plainRun of %d plain bytes = %d", n, got)
		}
	}
}

// FuzzTopLevelFields checks the scanner against encoding/json: whole or
// in pieces, it finds a body valid exactly when json.Unmarshal decodes it
// without error, and then reads the same model and max_tokens, but where
// a name matches only case-insensitively or the model is too long to
// keep; and the bound of its estimate is never under the one made from
// what json.Unmarshal reads.
//
//	go test -run '^$' -fuzz FuzzTopLevelFields -fuzztime 30s ./internal/spend/
func FuzzTopLevelFields(f *testing.F) {
	for _, seed := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`,
		`{"messages":[{"model":"x","max_tokens":9}],"model":"z","max_tokens":-1}`,
		`{"mod\u0065l":"a\ud83d\ude00\ud800","MAX_TOKENS":5,"max_tokens":null}`,
		`{"model":"a","model":null,"max_tokens":1e3}`,
		`{"a":[1,-0.5E+2,true,false,null,"\"model\""],"b":{"c":{}}}`,
		`null`,
		`[]`,
		"{\"model\":\"a\xffb\"}",
	} {
		f.Add([]byte(seed))
	}
	m, err := New(Config{Store: noStore{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want struct {
			Model     string `json:"model"`
			MaxTokens *int64 `json:"max_tokens"`
		}
		jerr := json.Unmarshal(body, &want)
		whole := scanRequest(body, 0)
		if pieces := scanRequest(body, 1+len(body)%7); pieces != whole {
			t.Fatalf("scan(%q) in pieces = %+v, whole = %+v", body, pieces, whole)
		}
		if whole.ok != (jerr == nil) {
			t.Fatalf("scan(%q) ok = %v, json.Unmarshal = %v", body, whole.ok, jerr)
		}
		if !whole.ok {
			return
		}
		if !whole.foldModel && !whole.modelLong && whole.model != want.Model {
			t.Errorf("scan(%q) model = %q, json.Unmarshal %q", body, whole.model, want.Model)
		}
		if !whole.foldMax && (whole.maxSet != (want.MaxTokens != nil) || whole.maxSet && whole.maxTokens != *want.MaxTokens) {
			t.Errorf("scan(%q) max_tokens = %d (read %v), json.Unmarshal %v", body, whole.maxTokens, whole.maxSet, fmtPtr(want.MaxTokens))
		}
		n := int64(len(body))
		got, old := EstimateMessages(body, n, 64000), estimateJSON(body, n, 64000)
		if m.Bound(got) < m.Bound(old) {
			t.Errorf("EstimateMessages(%q) = %+v, bound %d; from encoding/json %+v, bound %d", body, got, m.Bound(got), old, m.Bound(old))
		}
		if !whole.foldModel && !whole.foldMax && !whole.modelLong && got != old {
			t.Errorf("EstimateMessages(%q) = %+v, from encoding/json %+v", body, got, old)
		}
	})
}

func fmtPtr(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// TestBodyScan_EstimateAsBefore: a body read as it is forwarded is
// estimated as EstimateMessages estimates it read whole before.
func TestBodyScan_EstimateAsBefore(t *testing.T) {
	m, err := New(Config{Store: noStore{}, MaxTokens: 5000, MaxBody: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	small := []byte(`{"model":"claude-haiku-4-5","max_tokens":77,"messages":[{"role":"user","content":"Say \"max_tokens\":1."}]}`)
	big := []byte(`{"model":"claude-haiku-4-5","max_tokens":77,"pad":"` + strings.Repeat("x", MaxRead) + `"}`)
	tests := []struct {
		name   string
		body   []byte
		length int64 // the Content-Length: -1 unknown
		read   int   // bytes the proxy reads: -1 all
		want   Estimate
	}{
		{"read whole", small, int64(len(small)), -1, EstimateMessages(small, int64(len(small)), 5000)},
		{"read whole, length unknown", small, -1, -1, EstimateMessages(small, int64(len(small)), 5000)},
		{"read up to its length, EOF not seen", small, int64(len(small)), len(small), EstimateMessages(small, int64(len(small)), 5000)},
		{"not read whole", small, int64(len(small)), 20, EstimateMessages(nil, int64(len(small)), 5000)},
		{"not read whole, length unknown", small, -1, len(small) - 1, EstimateMessages(nil, 64<<20, 5000)},
		{"not read at all", small, int64(len(small)), 0, EstimateMessages(nil, int64(len(small)), 5000)},
		{"over MaxRead, length unknown", big, -1, -1, EstimateMessages(nil, 64<<20, 5000)},
		{"not JSON", []byte(`{"model":"claude-haiku-4-5","max_tokens":77`), -1, -1, EstimateMessages(nil, 43, 5000)},
		{"empty", []byte{}, 0, -1, EstimateMessages(nil, 0, 5000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{1, 7, 4096} {
				src := &chunked{data: append([]byte(nil), tt.body...), n: n}
				r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
				r.Body, r.ContentLength = src, tt.length
				if len(tt.body) == 0 {
					r.Body = http.NoBody
				}
				b := &bodyScan{}
				b.wrap(r, &m.scanners)
				var out bytes.Buffer
				if tt.read < 0 {
					_, _ = io.CopyBuffer(&out, r.Body, make([]byte, 512))
				} else {
					_, _ = io.CopyBuffer(&out, io.LimitReader(r.Body, int64(tt.read)), make([]byte, 512))
				}
				if want := tt.body[:min(len(tt.body), out.Len())]; !bytes.Equal(out.Bytes(), want) {
					t.Fatalf("%d bytes a read: the body read through bodyScan differs", n)
				}
				if got := b.estimate(5000, 64<<20); got != tt.want {
					t.Errorf("%d bytes a read: estimate = %+v, want %+v", n, got, tt.want)
				}
				// Read after settlement: handed on, not looked at.
				if _, err := io.Copy(io.Discard, r.Body); err != nil {
					t.Errorf("read after settlement: %v", err)
				}
				b.release()
			}
		})
	}
}

// BenchmarkScanner measures the scanner alone: a small Messages body, a
// JSON answer, and a large body, mostly one string.
//
//	go test -run '^$' -bench BenchmarkScanner -benchmem ./internal/spend/
func BenchmarkScanner(b *testing.B) {
	answer := []byte(`{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
		`"content":[{"type":"text","text":"Hello! How can I help you today?"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":18}}`)
	small := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":false,"messages":[{"role":"user","content":"Say hello. Say hello, please."}]}`)
	large := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"` + strings.Repeat(`Some text\n with \"quotes\" and lines. `, 1<<15) + `"}]}`)
	tests := []struct {
		name string
		sch  []member
		in   []byte
	}{
		{"request", requestSchema, small},
		{"answer", answerSchema, answer},
		{"large", requestSchema, large},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			var s scanner
			b.SetBytes(int64(len(tt.in)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s.reset(tt.sch)
				s.write(tt.in)
				if !s.close() {
					b.Fatal("not valid")
				}
			}
		})
	}
}
