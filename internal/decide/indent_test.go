package decide

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestIndentedLen: indentedLen is the length json.Indent writes, two
// spaces a level, whatever space raw holds.
func TestIndentedLen(t *testing.T) {
	tests := []string{
		`{}`, `[]`, `1`, `"x"`, `{"a":1}`, `[[[[]]]]`,
		`{"a":{"b":[1,2,{}],"c":[]},"d":"e"}`,
		`[{"a":[{"b":{}}]},[],[1]]`,
		`{"order": {"items": 3, "total": 42.5}, "note": "<b>fragile</b>"}`,
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := json.Indent(&buf, []byte(tt), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got, want := indentedLen(json.RawMessage(tt)), buf.Len(); got != want {
			t.Errorf("indentedLen(%s) = %d, want %d", tt, got, want)
		}
	}
}
