package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// EncodingError is an answer whose Content-Encoding the broker does not
// pass on, since it cannot read the body through it to keep a value out.
// Why says what the header held, for the box's refusal.
type EncodingError struct{ Why string }

func (e *EncodingError) Error() string { return "proxy: answer " + e.Why }

// contentCoding judges an answer's Content-Encoding header values as a
// whole, never by the first alone. It returns "" for an answer as it is
// (no header, or one naming only identity) and otherwise the one coding
// the header names, in lower case. More than one Content-Encoding header,
// or stacked codings, are an *EncodingError.
func contentCoding(values []string) (string, error) {
	if len(values) > 1 {
		return "", &EncodingError{Why: fmt.Sprintf("with %d Content-Encoding headers (%q)", len(values), values)}
	}
	if len(values) == 0 {
		return "", nil
	}
	var codings []string
	for _, c := range strings.Split(values[0], ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c != "" && c != "identity" {
			codings = append(codings, c)
		}
	}
	switch len(codings) {
	case 0:
		return "", nil
	case 1:
		return codings[0], nil
	}
	return "", &EncodingError{Why: fmt.Sprintf("in stacked content encodings (%s)", strings.Join(codings, ", "))}
}

// Decoding judges an answer's Content-Encoding header values as
// contentCoding does, and returns the one coding they name when it is
// among readable ("" for none); any other is an *EncodingError.
func Decoding(values []string, readable ...string) (string, error) {
	c, err := contentCoding(values)
	if err != nil || c == "" || slices.Contains(readable, c) {
		return c, err
	}
	return "", &EncodingError{Why: fmt.Sprintf("in a content encoding (%s)", c)}
}

// Unencoded returns nil when the answer whose header is h comes as it
// is, and an *EncodingError saying why otherwise: for an upstream the
// broker asked for no encoding, whose answer it reads as it passes.
func Unencoded(h http.Header) error {
	_, err := Decoding(h.Values("Content-Encoding"))
	return err
}
