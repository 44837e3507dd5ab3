package feedback

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		words []string
		err   error
	}{
		{"entries", `{"entries":[{"note":"n"}]}`, []string{"agent"}, nil},
		{"counts", `{"counts":{"refusals":2}}`, []string{"passive"}, nil},
		{"both", `{"entries":[{}],"counts":{"x":1}}`, []string{"agent", "passive"}, nil},
		{"both, counts first", `{"counts":{"x":1},"entries":[{}]}`, []string{"agent", "passive"}, nil},
		{"other keys are the receiver's", `{"entries":[1],"v":2,"meta":{"a":[]}}`, []string{"agent"}, nil},
		{"whitespace around", " \n{ \"entries\" : [ {} ] }\n", []string{"agent"}, nil},
		{"empty object", `{}`, []string{}, ErrEmpty},
		{"empty entries", `{"entries":[]}`, []string{}, ErrEmpty},
		{"empty counts", `{"counts":{}}`, []string{}, ErrEmpty},
		{"empty entries beside counts", `{"entries":[],"counts":{"e":3}}`, []string{"passive"}, nil},
		{"counts an array", `{"counts":[1,2]}`, []string{}, ErrCountsNotObj},
		{"counts null", `{"counts":null}`, []string{}, ErrCountsNotObj},
		{"entries an object", `{"entries":{"note":"n"}}`, []string{}, ErrEntriesNotArr},
		{"entries a string beside counts", `{"entries":"x","counts":{"a":1}}`, []string{"passive"}, ErrEntriesNotArr},
		{"null", `null`, []string{}, ErrNotObject},
		{"array", `[{"note":"n"}]`, []string{}, ErrNotObject},
		{"string", `"entries"`, []string{}, ErrNotObject},
		{"no body", ``, []string{}, ErrNotJSON},
		{"not JSON", `entries=1`, []string{}, ErrNotJSON},
		{"truncated", `{"entries":[{}]`, []string{}, ErrNotJSON},
		{"two values", `{"entries":[{}]} {}`, []string{}, ErrNotJSON},
		{"invalid UTF-8", "{\"entries\":[\"\xff\"]}", []string{}, ErrNotJSON},
		{"entries twice, the first empty", `{"entries":[],"entries":[{}]}`, []string{"agent"}, ErrDuplicate},
		{"counts twice, the last empty", `{"counts":{"a":1},"counts":{}}`, []string{"passive"}, ErrDuplicate},
		{"a key repeated inside counts still counts", `{"counts":{"a":1,"a":2}}`, []string{"passive"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse([]byte(tt.body))
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Errorf("Parse(%q) error = %v, want %v", tt.body, err, tt.err)
			}
			if got := b.Words(); !slices.Equal(got, tt.words) {
				t.Errorf("Parse(%q).Words() = %q, want %q", tt.body, got, tt.words)
			}
		})
	}
}

// TestParse_MessagesNeverEchoTheBody: a refusal's message is the broker's
// own text, never part of what the box sent.
func TestParse_MessagesNeverEchoTheBody(t *testing.T) {
	const marker = "MARKER-7f3a"
	for _, body := range []string{`{"entries":"` + marker + `"}`, marker, `{"counts":["` + marker + `"]}`, `{"` + marker + `":1}`} {
		_, err := Parse([]byte(body))
		if err == nil {
			t.Fatalf("Parse(%q) = nil error, want one", body)
		}
		if msg := message(err); strings.Contains(msg, marker) {
			t.Errorf("message(Parse(%q)) = %q, holds the body", body, msg)
		}
	}
}
