package decide_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/intentius/boxbroker/internal/decide"
)

// FuzzParseRequest holds the decide request parser to its contract for
// any body and question bound: either an *InvalidError whose message is
// short, valid UTF-8 and safe to show (the broker answers it as a 422), or
// a request within the limits: a named model, a state that is JSON, 1 to
// max questions with distinct ids that are exactly the body's, each with
// a type and criteria of the right kind, and every choice question with
// distinct, non-empty options.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-haiku-4-5","state":{"x":1},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":{"a":"A","b":"B"}}}}`,
		`{"model":"m","state":null,"questions":{"n":{"type":"noul","instructions":"?","criteria":[]},"s":{"type":"score","instructions":"?","criteria":{}},"r":{"type":"rank","instructions":"","criteria":[]}}}`,
		`{"model":"m","state":[],"questions":{"c":{"type":"choice","instructions":"","criteria":["a",{"name":"b"},{"id":"c"}]}}}`,
		`{"model":"m","state":1,"questions":{"q":{"type":"choice","instructions":"","criteria":{"a":1,"a":2}}}}`,
		`{"model":"m","model":"n","state":1,"questions":{}}`,
		`{"model":"","state":1,"questions":{"q":{}}}`,
		`{"model":"m","state":1,"questions":{"q":{"type":"choice","instructions":"","criteria":[""]}}}`,
		`{"model":"m","state":1,"questions":{"q":{"type":"noul","instructions":"","criteria":[]}},"QUESTIONS":{}}`,
		`[]`, `null`, ``, `{"model":"m"`, "{\"model\":\"\xff\"}", `{"model":"m","state":{},"questions":{"q":1}} {}`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, body []byte, max uint8) {
		req, err := decide.ParseRequest(body, int(max))
		if err != nil {
			var ie *decide.InvalidError
			if !errors.As(err, &ie) || ie.Message == "" || !utf8.ValidString(ie.Message) || len(ie.Message) > 1024 {
				t.Fatalf("ParseRequest(%q) error %#v is not a message for a 422", body, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("ParseRequest(%q) accepted a body that is not JSON", body)
		}
		// (A map, not a struct: encoding/json matches struct fields in any case.)
		var top map[string]json.RawMessage
		var questions map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil || json.Unmarshal(top["questions"], &questions) != nil {
			t.Fatalf("ParseRequest(%q) accepted a body with no questions object: %v", body, err)
		}
		if req.Model == "" || !json.Valid(req.State) {
			t.Fatalf("ParseRequest(%q) = model %q state %q", body, req.Model, req.State)
		}
		n := len(req.Questions)
		if n == 0 || (max > 0 && n > int(max)) || n != len(questions) {
			t.Fatalf("ParseRequest(%q) = %d questions, want 1 to %d, as many as the body's %d", body, n, max, len(questions))
		}
		ids := map[string]bool{}
		for _, q := range req.Questions {
			if ids[q.ID] {
				t.Fatalf("ParseRequest(%q) gives question %q twice", body, q.ID)
			}
			ids[q.ID] = true
			if _, ok := questions[q.ID]; !ok {
				t.Fatalf("ParseRequest(%q) made up question %q", body, q.ID)
			}
			c := bytes.TrimLeft(q.Criteria, " \t\r\n")
			if q.Type == "" || len(c) == 0 || (c[0] != '{' && c[0] != '[') || !json.Valid(q.Criteria) {
				t.Fatalf("ParseRequest(%q) question %q = type %q criteria %q", body, q.ID, q.Type, q.Criteria)
			}
			if (q.Type == decide.TypeChoice) != (q.Options != nil) {
				t.Fatalf("ParseRequest(%q) question %q of type %q has options %q", body, q.ID, q.Type, q.Options)
			}
			opts := map[string]bool{}
			for _, o := range q.Options {
				if o == "" || opts[o] {
					t.Fatalf("ParseRequest(%q) question %q options %q", body, q.ID, q.Options)
				}
				opts[o] = true
			}
		}
	})
}
