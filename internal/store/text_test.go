package store

import "testing"

func TestText(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"claude-haiku-4-5", 0, "claude-haiku-4-5"},
		{"a\x00b", 0, "a\uFFFDb"},
		{"a\xffb", 0, "a\uFFFDb"},
		{"abcé", 4, "abc"}, // é's first byte is the 4th: cut before it
		{"abcé", 5, "abcé"},
		{"abcdef", 3, "abc"},
		{"\x00\x00", 3, "\uFFFD"}, // each U+FFFD is 3 bytes
	}
	for _, tt := range tests {
		if got := Text(tt.in, tt.max); got != tt.want {
			t.Errorf("Text(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
