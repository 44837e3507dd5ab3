package brokertest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAnswerFromSchema(t *testing.T) {
	tests := []struct {
		name, schema, want, wantErr string
	}{
		{"first enum value", `{"type":"string","enum":["b","a"]}`, `"b"`, ""},
		{"numbers split evenly", `{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"},"s":{"type":"string"}},"required":["x","y","s"],"additionalProperties":false}`,
			`{"s":"stand-in","x":0.5,"y":0.5}`, ""},
		{"nested", `{"type":"object","properties":{"p":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"c":{"type":"number"},"d":{"type":"number"}},"additionalProperties":false},"n":{"type":"number"}},"additionalProperties":false}`,
			`{"n":1,"p":{"a":0.25,"b":0.25,"c":0.25,"d":0.25}}`, ""},
		{"open object refused", `{"type":"object","properties":{}}`, "", "additionalProperties to false"},
		{"nested open object refused", `{"type":"object","properties":{"p":{"type":"object"}},"additionalProperties":false}`, "", "p: an object must set additionalProperties"},
		{"unknown type refused", `{"type":"date"}`, "", "not a type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s any
			if err := json.Unmarshal([]byte(tt.schema), &s); err != nil {
				t.Fatal(err)
			}
			v, err := AnswerFromSchema(s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("AnswerFromSchema(%s) error = %v, want %q", tt.schema, err, tt.wantErr)
				}
				return
			}
			got, _ := json.Marshal(v)
			if err != nil || string(got) != tt.want {
				t.Errorf("AnswerFromSchema(%s) = %s, %v, want %s", tt.schema, got, err, tt.want)
			}
		})
	}
}
