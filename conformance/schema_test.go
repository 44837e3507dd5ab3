package conformance

import (
	"encoding/json"
	"testing"
)

// TestValidator_PatternsReadAsJavaScript: the schema's patterns are
// JavaScript's, so \s is JavaScript's white space (the no-break space,
// the vertical tab, the line and paragraph separators and the other
// Unicode spaces), not Go's ASCII \s; a payer's principal with any of
// them is no principal, and one with U+0085, which JavaScript does not
// count as white space, is.
func TestValidator_PatternsReadAsJavaScript(t *testing.T) {
	v, err := newValidator()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		principal string
		valid     bool
	}{
		{"github:octo", true},
		{"a b", false},
		{"a\tb", false},
		{"a\vb", false},
		{"a\u00a0b", false},
		{"a\u1680b", false},
		{"a\u2000b", false},
		{"a\u200ab", false},
		{"a\u2028b", false},
		{"a\u2029b", false},
		{"a\u202fb", false},
		{"a\u205fb", false},
		{"a\u3000b", false},
		{"a\ufeffb", false},
		{"a\u0085b", true},
		{"a\u200bb", true}, // zero width space: not white space in JavaScript
	}
	for _, tt := range tests {
		body, _ := json.Marshal(map[string]any{"kind": "owner", "principal": tt.principal})
		if p := v.validate("payer", body); (p == "") != tt.valid {
			t.Errorf("validate(payer %q) = %q, want valid %v", tt.principal, p, tt.valid)
		}
	}
}

func TestECMARegexp(t *testing.T) {
	tests := []struct {
		pattern, in string
		want        bool
	}{
		{`^[^\s]+$`, "ab", true},
		{`^[^\s]+$`, "a\u00a0b", false},
		{`^\s$`, "\u3000", true},
		{`^\s$`, "x", false},
		{`^\S+$`, "ab", true},
		{`^\S+$`, "a\u2028", false},
		{`^[^\u0000-\u001f]+$`, "a\u001fb", false},
		{`^[^\u0000-\u001f]+$`, "ab", true},
		{`^\\s$`, `\s`, true},
		{`^\d{4}$`, "2026", true},
	}
	for _, tt := range tests {
		re, err := ecmaRegexp(tt.pattern)
		if err != nil {
			t.Errorf("ecmaRegexp(%q): %v", tt.pattern, err)
			continue
		}
		if got := re.MatchString(tt.in); got != tt.want {
			t.Errorf("ecmaRegexp(%q).MatchString(%q) = %v, want %v", tt.pattern, tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{`^[\S]$`, `^[]]$`, `^[^]$`} {
		if _, err := ecmaRegexp(bad); err == nil {
			t.Errorf("ecmaRegexp(%q) = nil error, want one: Go cannot read it as JavaScript does", bad)
		}
	}
}
