package store

import (
	"strings"
	"unicode/utf8"
)

// Text is s as every store keeps it in a text column, cut to at most max
// bytes (no cut when max is zero or less) at a character's boundary:
// invalid UTF-8 and NUL bytes, which PostgreSQL refuses in text for good
// (store.ErrRejected: a record set aside), become U+FFFD. A string a box
// or an upstream chose (a model's name, a refusal's message) goes
// through Text before it is put in a record.
func Text(s string, max int) string {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
