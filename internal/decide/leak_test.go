package decide_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

var uEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}`)

// read is what a reader of the upstream body could make of it: the body
// JSON-decoded, and then any \uXXXX left in its text decoded too (the
// state reaches the model as JSON text inside the prompt).
func read(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return string(body)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	s := strings.ReplaceAll(b.String(), `\\`, `\`)
	return uEscape.ReplaceAllStringFunc(s, func(e string) string {
		n, _ := strconv.ParseUint(e[2:], 16, 32)
		return string(rune(n))
	})
}

func escapeEvery(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04X`, s[i])
	}
	return b.String()
}

// TestDecide_JSONEscapedTokenIsReplaced: a box that writes its token in
// the state with JSON escapes, which the byte-level replacement did not
// see, still sends no token upstream.
func TestDecide_JSONEscapedTokenIsReplaced(t *testing.T) {
	b, token := setup(t, brokertest.Options{})
	tests := []struct {
		name, written string
	}{
		{"underscore escaped", strings.Replace(token, "_", `\u005f`, 1)},
		{"every character escaped", escapeEvery(token)},
		{"in the instructions", `b\u0062x_` + token[4:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"model":"m","state":{"env":"TOKEN=` + tt.written + `"},"questions":{"q":{"type":"noul","instructions":"Is ` + tt.written + ` set?","criteria":{}}}}`)
			before := len(b.Upstream.Seen())
			resp := post(b, token, body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			seen := b.Upstream.Seen()[before:]
			if len(seen) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(seen))
			}
			if strings.Contains(read(seen[0].Body), token) {
				t.Errorf("the upstream received the box's token, JSON-escaped")
			}
		})
	}
}

// TestDecide_CredentialInTheModelsAnswerNeverReachesTheBox: an upstream
// (a gateway the operator points at, or a model talked into it) that
// writes the credential it was called with into the answer's reason, as
// it is or JSON-escaped, or as the choice it made, hands none of it to
// the box: the reason comes back masked, and a choice that is no option
// is refused without naming it.
func TestDecide_CredentialInTheModelsAnswerNeverReachesTheBox(t *testing.T) {
	up := &scripted{}
	b, token := setup(t, brokertest.Options{Anthropic: &brokertest.Recorder{Handler: up}})
	const noul = `{"model":"m","state":{},"questions":{"q":{"type":"noul","instructions":"Is it?","criteria":{}}}}`
	const choice = `{"model":"m","state":{},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":["a","b"]}}}`
	tests := []struct {
		name, ask, text string
	}{
		{"in the reason", noul, `{"reason":"the key is ` + apiKey + `","noul":0.5}`},
		{"in the reason, JSON-escaped", noul, `{"reason":"the key is ` + escapeEvery(apiKey) + `","noul":0.5}`},
		{"as the choice", choice, `{"choice":"` + apiKey + `","confidence":1}`},
		{"as the choice, after 20 bytes", choice, `{"choice":"01234567890123456789` + apiKey + `","confidence":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.set(200, message(tt.text))
			resp := post(b, token, tt.ask)
			got := read(resp.Body)
			var h bytes.Buffer
			_ = resp.Header.Write(&h)
			// The credential's first 20 characters are enough to say
			// which key pays; none of them may come back.
			if strings.Contains(got, apiKey[:20]) || strings.Contains(string(resp.Body), apiKey[:20]) || strings.Contains(h.String(), apiKey[:20]) {
				t.Errorf("POST decide = %d, the answer carries the credential: %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestDecide_CredentialAsTheUpstreamsErrorTypeNeverReachesTheBox: the
// operator's key for a gateway (any value `credential set anthropic`
// takes) written in lower-case letters and "_", as an error type is: the
// gateway, refusing the question, names that key as its error's type,
// which the 502 quoted to the box as the upstream's error type. The
// refusal names an error type only when it is one the Anthropic API
// gives, never the upstream's own words.
func TestDecide_CredentialAsTheUpstreamsErrorTypeNeverReachesTheBox(t *testing.T) {
	const key = "operator_gateway_key_for_the_pool"
	up := &scripted{}
	b := brokertest.New(t, brokertest.Options{Anthropic: &brokertest.Recorder{Handler: up}})
	token := b.AddBox("a")
	b.SetCredential("anthropic", key)
	b.Report(token, brokertest.Entry("inference", "decide"))
	const noul = `{"model":"m","state":{},"questions":{"q":{"type":"noul","instructions":"Is it?","criteria":{}}}}`
	tests := []struct {
		name, errType, want string
	}{
		{"the credential as the type", key, ""},
		{"the API's own type", "rate_limit_error", "rate_limit_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.set(429, `{"type":"error","error":{"type":"`+tt.errType+`","message":"no"}}`)
			resp := post(b, token, noul)
			if resp.StatusCode != 502 || strings.Contains(string(resp.Body), key) || !strings.Contains(string(resp.Body), tt.want) {
				t.Errorf("POST decide, the upstream's error type %q = %d %s, want 502 naming %q and never the credential", tt.errType, resp.StatusCode, resp.Body, tt.want)
			}
		})
	}
}
