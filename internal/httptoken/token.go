// Package httptoken holds the checks both of boxbroker's own HTTP/1.1
// codecs (the box-facing server, internal/h1server, and the fast upstream
// transport and forwarder, internal/proxy) make of tokens: that methods
// and field names are RFC 9110 tokens, and whether a field lists one.
package httptoken

import (
	"net/textproto"
	"strings"
)

// chars are RFC 9110's tchar.
var chars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// Valid reports whether s is a token: one or more tchar.
func Valid[T string | []byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !chars[s[i]] {
			return false
		}
	}
	return true
}

// Listed reports whether the comma-separated field value v lists token t,
// in any case, each element trimmed of optional whitespace as net/http
// trims it (Connection: keep-alive, Close lists close).
func Listed(v, t string) bool {
	for part := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(textproto.TrimString(part), t) {
			return true
		}
	}
	return false
}
