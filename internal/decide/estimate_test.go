package decide

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestEstimate_InputBytesIsTheLargestQuestionsBody: the estimate's
// InputBytes is the length of the largest Messages body a question is
// asked in, whatever the state holds that JSON escapes (quotes, control
// characters, U+2028, invalid UTF-8) or indent lays out.
func TestEstimate_InputBytesIsTheLargestQuestionsBody(t *testing.T) {
	u, err := url.Parse("https://api.anthropic.com")
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Upstream: u})
	opts := make([]string, 300)
	for i := range opts {
		opts[i] = fmt.Sprintf(`"o%d":1`, i)
	}
	for _, state := range []string{
		`{}`,
		`{"a":[1,2,{"b":"c"}],"d":{"e":null}}`,
		`{"s":"quote \" backslash \\ tab \t line \n nul \u0000 \u2028 <&> é 😀"}`,
		"{\"s\":\"invalid \xff\xfe utf-8\"}",
		`{"deep":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
	} {
		body := []byte(`{"model":"claude-sonnet-4-5","state":` + state + `,"questions":{` +
			`"a":{"type":"noul","instructions":"Is it?","criteria":{"x":[1,2]}},` +
			`"b":{"type":"choice","instructions":"Pick.","criteria":{` + strings.Join(opts, ",") + `}},` +
			`"c":{"type":"never-heard-of-it","instructions":"?","criteria":{}}}}`)
		req, err := ParseRequest(body, MaxQuestions)
		if err != nil {
			t.Fatalf("ParseRequest(%s): %v", state, err)
		}
		var want int64
		for i := range req.Questions {
			if q := &req.Questions[i]; q.Asked() {
				b, err := messagesBody(req, q, c.cfg.MaxTokens)
				if err != nil {
					t.Fatal(err)
				}
				want = max(want, int64(len(b)))
			}
		}
		if e := c.Estimate(nil, body); e.InputBytes != want || e.Calls != 2 {
			t.Errorf("Estimate with state %q: InputBytes %d, Calls %d; want %d, 2", state, e.InputBytes, e.Calls, want)
		}
		if want < 10*int64(len(opts)) {
			t.Errorf("the test is wrong: the largest body, %d bytes, does not hold 300 options' schema", want)
		}
	}
}
