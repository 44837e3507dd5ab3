// Package httptoken holds the one check both of boxbroker's own HTTP/1.1
// codecs (the box-facing server, internal/h1server, and the fast upstream
// transport, internal/proxy) make of methods and field names: that they
// are RFC 9110 tokens.
package httptoken

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
