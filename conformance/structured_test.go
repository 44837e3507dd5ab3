package conformance

import (
	"encoding/json"
	"testing"
)

func TestFromSchema(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   string
	}{
		{"a string", `{"type":"string"}`, `"stand-in"`},
		{"a boolean", `{"type":"boolean"}`, `true`},
		{"an integer", `{"type":"integer"}`, `0`},
		{"an integer with a minimum", `{"type":"integer","minimum":3}`, `3`},
		{"a lone number", `{"type":"number"}`, `0.5`},
		{"a lone number with bounds", `{"type":"number","minimum":1,"maximum":5}`, `3`},
		{"an enum", `{"type":"string","enum":["billing","support"]}`, `"billing"`},
		{"a const", `{"const":"exactly"}`, `"exactly"`},
		{"a nullable string", `{"type":["null","string"]}`, `"stand-in"`},
		{"an array", `{"type":"array","items":{"type":"integer","minimum":2}}`, `[2]`},
		{"an object gets every property", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"boolean"}}}`, `{"a":"stand-in","b":true}`},
		{"a lone number property keeps its midpoint", `{"type":"object","properties":{"noul":{"type":"number","minimum":0,"maximum":1},"reason":{"type":"string"}}}`, `{"noul":0.5,"reason":"stand-in"}`},
		{"number properties share one evenly", `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"c":{"type":"number"},"d":{"type":"string"}}}`, `{"a":0.3333333333333333,"b":0.3333333333333333,"c":0.3333333333333333,"d":"stand-in"}`},
		{"two number properties", `{"properties":{"yes":{"type":"number"},"no":{"type":"number","minimum":0,"maximum":1}}}`, `{"no":0.5,"yes":0.5}`},
		{"a local ref", `{"$defs":{"p":{"type":"string","enum":["x"]}},"type":"object","properties":{"v":{"$ref":"#/$defs/p"}}}`, `{"v":"x"}`},
		{"anyOf takes the first", `{"anyOf":[{"type":"boolean"},{"type":"string"}]}`, `true`},
		{"nested objects", `{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"integer"}}}}}`, `{"o":{"n":0}}`},
		{"a self-referring schema ends", `{"type":"array","items":{"$ref":"#"}}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var schema map[string]any
			if err := json.Unmarshal([]byte(tt.schema), &schema); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(fromSchema(schema))
			if err != nil {
				t.Fatalf("fromSchema(%s) cannot be encoded: %v", tt.schema, err)
			}
			if tt.want == "" {
				return // only that it ends
			}
			if string(got) != tt.want {
				t.Errorf("fromSchema(%s) = %s, want %s", tt.schema, got, tt.want)
			}
		})
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 3, []string{""}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"ab", 3, []string{"a", "b"}},
		{"héllo", 2, []string{"hél", "lo"}},
	}
	for _, tt := range tests {
		got := chunks(tt.s, tt.n)
		if len(got) != len(tt.want) {
			t.Errorf("chunks(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("chunks(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			}
		}
	}
}
