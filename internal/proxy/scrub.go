package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/intentius/boxbroker/internal/token"
)

// A token, in the sense of this file, is any string shaped like one of
// boxbroker's own: a box token, a grant or an admin token, that is one of
// token.Prefixes followed by token.BodyLen characters token.IsBodyByte
// takes. Matching the shape rather than one box's value keeps every box's
// token and every grant out of what goes upstream, whoever's request
// carries it.
//
// Each of a token's characters may be written as itself or escaped as
// an answer's search for a value reads it (escapedWays): as a JSON escape
// \uXXXX (hex in either case), a percent escape %XX, an HTML character
// reference (&#98;, &#x62;), or so escaped twice (\\u0062, %2562,
// &amp;#98;): a JSON decoder, a query or form parser or an HTML reader
// upstream would turn any of these back into the token. A match is
// replaced by TokenMarker of the same length, so a body's length, and
// its Content-Length, do not change.

// tokenPrefixes are the prefixes matched, less their final "_".
var tokenPrefixes = func() (p []string) {
	for _, s := range token.Prefixes() {
		p = append(p, strings.TrimSuffix(s, "_"))
	}
	return p
}()

// MaxTokenSpan is the longest a token can be written: each of its
// token.Len characters escaped twice, in escapedSpan bytes.
const MaxTokenSpan = token.Len * escapedSpan

// markerText is TokenMarker's longest form, less its closing bracket.
var markerText = TokenMarkerPrefix + strings.Repeat("-", MaxTokenSpan)

// TokenMarkerPrefix begins every TokenMarker.
const TokenMarkerPrefix = "[token-removed"

// TokenMarker returns what replaces a token written in n bytes: n bytes
// of "[token-removed---]", with as many dashes as it takes. It holds no
// quote, backslash, percent sign or space, so it is as valid in a JSON
// string, a header, a path or a query as what it replaces. n is at least
// token.Len, the length of a token written plainly.
func TokenMarker(n int) string { return markerText[:n-1] + "]" }

// findToken returns the first token written in b at or after from, as
// the span b[start:end]; ok is false when there is none. A token must lie
// wholly within b.
func findToken(b []byte, from int) (start, end int, ok bool) {
	// Every way of writing a token has its "_" written as '_', or as an
	// escape that ends with the hex digits 5f or the decimal ones 95 (and
	// a ";"): find those, and look around each.
	lit, esc, escEnd := -2, -2, 0 // next candidate of each form; -2: not searched, -1: none
	for p := from; p < len(b); {
		if lit != -1 && lit < p {
			lit = nextByte(b, p, '_')
		}
		if esc != -1 && esc < p {
			esc, escEnd = nextEscapedSeparator(b, p)
		}
		i, n := lit, 1
		if i < 0 || (esc >= 0 && esc < i) {
			i, n = esc, escEnd-esc
		}
		if i < 0 {
			return 0, 0, false
		}
		if mayBeSeparator(b, i, i+n) {
			if s, e, ok := tokenAround(b, i, i+n); ok {
				return s, e, true
			}
		}
		p = i + 1
	}
	return 0, 0, false
}

// nextByte returns the index of the first c in b at or after p, or -1.
func nextByte(b []byte, p int, c byte) int {
	if j := bytes.IndexByte(b[p:], c); j >= 0 {
		return p + j
	}
	return -1
}

// nextEscapedSeparator returns the span of the first escaped "_" in b
// that begins at or after p (\u005f, %5f, &#x5f;, &#95;, escaped once
// or twice, the f in either case), or -1. It looks for the "5", less
// common in a JSON body than the backslashes of its escapes, and reads
// back from where an escape holding it would end.
func nextEscapedSeparator(b []byte, p int) (start, end int) {
	for q := p + 1; q+1 < len(b); q++ { // the 5 is never an escape's first byte
		j := bytes.IndexByte(b[q:len(b)-1], '5')
		if j < 0 {
			return -1, 0
		}
		q += j
		var ends [2]int
		es := ends[:0]
		switch {
		case b[q+1]|0x20 == 'f':
			es = append(es, q+2)
			if q+2 < len(b) && b[q+2] == ';' {
				es = append(es, q+3)
			}
		case b[q+1] == ';' && b[q-1] == '9':
			es = append(es, q+2)
		}
		for _, e := range es {
			if s := escapedBefore(b, e, '_'); s >= p {
				return s, e
			}
		}
	}
	return -1, 0
}

// escapedBefore returns where c begins when it is written escaped, once
// or twice, right before b[end], the escape beginning at or after from;
// -1 when it is not. Of several, the longest that does not begin with a
// backslash an odd run of backslashes ends before: that one closes an
// escaped backslash (`\\\u0062` is "\\" and "\u0062" to a JSON
// reader), and an escape begun there would leave the backslash before
// it to escape what replaces the token, which no JSON reader takes.
func escapedBefore(b []byte, end int, c byte) int {
	// An escape of c ends with c's last hex digit or a reference's ";",
	// and begins with one of escapedWays' first bytes.
	if end == 0 || b[end-1]|0x20 != "0123456789abcdef"[c&0xf] && b[end-1] != ';' {
		return -1
	}
	for k := min(end, escapedSpan); k > 1; k-- {
		if !intro[b[end-k]] || b[end-k] == '\\' && oddBackslashesBefore(b, end-k) {
			continue
		}
		if w := tokenCharAt(b[:end], end-k); int(w.n) == k && w.b[0] == c {
			return end - k
		}
	}
	return -1
}

// oddBackslashesBefore reports whether an odd run of backslashes ends
// right before b[i].
func oddBackslashesBefore(b []byte, i int) bool {
	n := 0
	for i > 0 && b[i-1] == '\\' {
		n++
		i--
	}
	return n%2 == 1
}

// mayBeSeparator is a quick test that b[sep:body], a "_", cannot be a
// token's: what ends before it cannot end a prefix (its letter, or the
// last byte of an escape of it: a hex digit or a reference's ";"), or
// what follows cannot begin the token.BodyLen characters after it.
func mayBeSeparator(b []byte, sep, body int) bool {
	if sep == 0 || len(b)-body < token.BodyLen {
		return false
	}
	if !mayEndPrefix(b[sep-1]) {
		return false
	}
	c := b[body]
	return token.IsBodyByte(c) || c == '\\' || c == '%' || c == '&'
}

// mayEndPrefix reports whether c may be the last byte of a prefix less
// its "_", written as itself or escaped: the letter itself, the last hex
// digit (either case) of an escape of it, or a reference's ";".
func mayEndPrefix(c byte) bool { return prefixEnds[c] }

// prefixEnds is mayEndPrefix's table.
var prefixEnds = func() (t [256]bool) {
	t[';'] = true
	for _, p := range tokenPrefixes {
		l := p[len(p)-1]
		d := "0123456789abcdef"[l&0xf]
		t[l], t[d], t[d&^0x20] = true, true, true
	}
	return t
}()

// tokenAround reports whether b[sep:body] is a token's "_": one of the
// prefixes ends right before it and token.BodyLen characters
// token.IsBodyByte takes follow it.
func tokenAround(b []byte, sep, body int) (start, end int, ok bool) {
	start = -1
	for _, p := range tokenPrefixes {
		if s := before(b, sep, p); s >= 0 {
			start = s
			break
		}
	}
	if start < 0 {
		return 0, 0, false
	}
	end = body
	for range token.BodyLen {
		w := tokenCharAt(b, end)
		if w.n == 0 || !token.IsBodyByte(w.b[0]) {
			return 0, 0, false
		}
		end += int(w.n)
	}
	return start, end, true
}

// before returns where want begins when it is written, each byte as
// itself or escaped, right before b[end]; -1 when it is not.
func before(b []byte, end int, want string) int {
	if want == "" {
		return end
	}
	c := want[len(want)-1]
	rest := want[:len(want)-1]
	if end >= 1 && b[end-1] == c {
		if s := before(b, end-1, rest); s >= 0 {
			return s
		}
	}
	if s := escapedBefore(b, end, c); s >= 0 {
		return before(b, s, rest)
	}
	return -1
}

// tokenCharAt returns how the character at b[i] is written when it may
// be a token's: itself, or an escape, once or twice, of a byte
// token.IsBodyByte takes (of which escapedWays finds at most one at a
// place). Its n is 0 when i is past b.
func tokenCharAt(b []byte, i int) way {
	if i >= len(b) {
		return way{}
	}
	switch b[i] {
	case '%', '\\', '&':
		var buf [8]way
		for _, w := range escapedWays(buf[:0], b[i:]) {
			if w.k == 1 && w.n > 1 && token.IsBodyByte(w.b[0]) {
				return w
			}
		}
	}
	return one(b[i], 1)
}

// mayHoldToken is a cheap test that s cannot hold a token: it has no "_"
// and no escape that could be one (all end with 5f, either case, or 95;).
func mayHoldToken(s string) bool {
	if strings.IndexByte(s, '_') >= 0 {
		return true
	}
	for i := 0; i+1 < len(s); i++ {
		j := strings.IndexByte(s[i:len(s)-1], '5')
		if j < 0 {
			return false
		}
		if i += j; s[i+1]|0x20 == 'f' || s[i+1] == ';' {
			return true
		}
	}
	return false
}

// ScrubTokens returns s with every token written in it replaced by a
// TokenMarker of the same length, and how many it replaced. s is returned
// as it is when it holds none.
func ScrubTokens(s string) (string, int) {
	if !mayHoldToken(s) {
		return s, 0
	}
	b := []byte(s)
	n, _ := scrubFrom(b, 0)
	if n == 0 {
		return s, 0
	}
	return string(b), n
}

// ScrubKept returns s as a record the broker keeps (an audit row, a
// journal line, a log line, what a box reported) may hold it: every token
// written in it, as ScrubTokens finds one, replaced by a TokenMarker, and
// what is left of any other written plainly (a token's prefix and the
// base64url characters after it, such as a token cut short) cut to its
// prefix and "…", as token.RedactPath cuts a path. s is returned as it is
// when it holds neither.
func ScrubKept(s string) string {
	s, _ = ScrubTokens(s)
	return token.RedactPath(s)
}

// ScrubKeptAll returns list with ScrubKept applied to each string: list
// itself when none changes, and a copy otherwise, so that a list shared
// with others is never changed.
func ScrubKeptAll(list []string) []string {
	for i, v := range list {
		if kept := ScrubKept(v); kept != v {
			out := append([]string(nil), list...)
			out[i] = kept
			for j := i + 1; j < len(out); j++ {
				out[j] = ScrubKept(out[j])
			}
			return out
		}
	}
	return list
}

// ScrubTokensInPlace replaces, in b itself, every token written in b by a
// TokenMarker of the same length, and returns how many it replaced.
func ScrubTokensInPlace(b []byte) int {
	n, _ := scrubFrom(b, 0)
	return n
}

// scrubFrom replaces, in place, every token wholly within b at or after
// from; it returns how many, and the end of the last one (from for none).
func scrubFrom(b []byte, from int) (n, last int) {
	last = from
	for {
		s, e, ok := findToken(b, last)
		if !ok {
			return n, last
		}
		copy(b[s:e], TokenMarker(e-s))
		n++
		last = e
	}
}

// ScrubHeader replaces every token written in h's values, and deletes
// every header whose name holds one, in any case: the server writes a
// name in its canonical case (X-Bbx_…), which would hide a token from a
// search that minds case while leaving most of it. It returns how many
// headers it changed.
func ScrubHeader(h http.Header) int { return rewriteHeader(h, ScrubTokens, nameHoldsToken) }

// nameHoldsToken reports whether a header's name holds a token, ASCII
// case aside (a token's prefix is lower-case, and its body takes either
// case).
func nameHoldsToken(name string) bool {
	_, n := ScrubTokens(strings.ToLower(name))
	return n > 0
}

// scrubChunk is how much a TokenScrubber reads from its source at a time.
const scrubChunk = 32 << 10

// TokenScrubber is an io.ReadCloser that copies a request body with every
// token written in it replaced by a TokenMarker of the same length, so the
// body's length is unchanged. It holds at most MaxTokenSpan-1 bytes back
// from one read to the next (a token may be split across reads), and
// passes the rest on as it comes; at the source's io.EOF it passes on what
// it held. When the source fails with another error, what it held is
// dropped and the error returned.
//
// A TokenScrubber is not safe for concurrent use.
type TokenScrubber struct {
	src io.ReadCloser
	buf []byte // buf[off:ready] is scrubbed, ready to return; buf[ready:] is held
	off int
	rdy int
	err error
	n   int
}

// NewTokenScrubber returns a TokenScrubber reading src. Closing it closes
// src.
func NewTokenScrubber(src io.ReadCloser) *TokenScrubber {
	return &TokenScrubber{src: src}
}

// Replaced reports how many tokens the TokenScrubber has replaced so far.
func (s *TokenScrubber) Replaced() int { return s.n }

// Read reads the source with every token replaced.
func (s *TokenScrubber) Read(p []byte) (int, error) {
	for s.off == s.rdy {
		if s.err != nil {
			return 0, s.err
		}
		// Keep only what is held, at the front.
		held := copy(s.buf[:cap(s.buf)], s.buf[s.rdy:])
		s.buf, s.off, s.rdy = s.buf[:held], 0, 0
		if cap(s.buf) == 0 {
			s.buf = getScrubBuf()
		}
		n, err := s.src.Read(s.buf[held:cap(s.buf)])
		s.buf = s.buf[:held+n]
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			s.err = err
		default:
			s.err = err
			s.buf = s.buf[:0]
			return 0, err
		}
		k, last := scrubFrom(s.buf, 0)
		s.n += k
		s.rdy = len(s.buf)
		if s.err == nil {
			// A token not yet whole begins after len-MaxTokenSpan.
			s.rdy = max(last, len(s.buf)-(MaxTokenSpan-1), 0)
		}
		if n == 0 && s.err == nil {
			return 0, nil
		}
	}
	n := copy(p, s.buf[s.off:s.rdy])
	s.off += n
	if s.off == s.rdy && s.err != nil {
		// Drained: nothing more is read from buf.
		putScrubBuf(s.buf)
		s.buf, s.off, s.rdy = nil, 0, 0
	}
	return n, nil
}

// scrubBufs holds TokenScrubber buffers between requests.
var scrubBufs = sync.Pool{New: func() any { return new([MaxTokenSpan + scrubChunk]byte) }}

func getScrubBuf() []byte { return scrubBufs.Get().(*[MaxTokenSpan + scrubChunk]byte)[:0] }

func putScrubBuf(b []byte) {
	scrubBufs.Put((*[MaxTokenSpan + scrubChunk]byte)(b[:MaxTokenSpan+scrubChunk]))
}

// Close closes the source.
func (s *TokenScrubber) Close() error { return s.src.Close() }
