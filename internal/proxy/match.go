package proxy

import (
	"bytes"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// absent reports whether no occurrence of a form starts in data[:cut],
// where every form's whole span before the cut is in data. With a few
// forms, none Escaped or Wrapped, it asks bytes.Index of each (which skips along at
// the speed of memory, where nextStart stops at every byte a form starts
// with, as common a byte as "s"); otherwise whether nextStart finds a
// place one may start.
func (s *FormSet) absent(sc *scratch, data []byte, cut int) bool {
	if s.rest != nil && !s.rest.absent(sc.rest, data, cut) {
		return false
	}
	if len(s.lists[0].order) == len(s.forms) && len(s.forms) <= fewStarts {
		for _, f := range s.forms {
			if bytes.Contains(data, f.Old) {
				return false
			}
		}
		return true
	}
	for k := range sc.next {
		sc.next[k] = -2
	}
	return s.nextOwn(sc, data, 0, cut) < 0
}

// replace appends to out data[:cut] with every occurrence that starts
// before cut replaced, and returns it, where in data it stopped (cut, or
// past it, at the end of an occurrence that straddles it) and how many
// it replaced. Before the cut, every form's whole span must be in data
// unless cut is len(data).
func (s *FormSet) replace(sc *scratch, out, data []byte, cut int) ([]byte, int, int) {
	sc.reset()
	i, n := 0, 0
	chained := s.rest != nil // branched on here, not called through: this loop is hot
	for i < cut {
		var j int
		if chained {
			j = s.nextChained(sc, data, i, cut)
		} else {
			j = s.nextOwn(sc, data, i, cut)
		}
		if j < 0 {
			out = append(out, data[i:cut]...)
			i = cut
			break
		}
		var k, m int
		if chained {
			k, m = s.matchChained(sc, data[j:])
		} else {
			k, m = s.matchOwn(sc, data[j:])
		}
		if m > 0 {
			out = append(out, data[i:j]...)
			switch f := s.form(k); {
			case f.Own:
				out = append(out, s.own...)
			case f.Fill != 0:
				out = append(out, bytes.Repeat([]byte{f.Fill}, m)...)
			default:
				out = append(out, f.New...)
			}
			i = j + m
			n++
			continue
		}
		out = append(out, data[i:j+1]...)
		i = j + 1
	}
	return out, max(i, 0), n
}

// form is the form at place k of s, its rest's following its own.
func (s *FormSet) form(k int) *Form {
	for k >= len(s.forms) {
		k -= len(s.forms)
		s = s.rest
	}
	return &s.forms[k]
}

// match returns the form found longest at the start of b (of those
// equally long, the first in the set, s's own before its rest's), and
// how many bytes of b it spans (0 for none).
func (s *FormSet) match(sc *scratch, b []byte) (form, n int) {
	if s.rest == nil {
		return s.matchOwn(sc, b)
	}
	return s.matchChained(sc, b)
}

// matchChained is match of a set with a rest.
func (s *FormSet) matchChained(sc *scratch, b []byte) (form, n int) {
	form, n = s.matchOwn(sc, b)
	if f, m := s.rest.match(sc.rest, b); m > n {
		form, n = len(s.forms)+f, m
	}
	return form, n
}

// matchOwn is match over s's own forms, not its rest's. It walks every
// list, each with every way b can write each byte at once.
func (s *FormSet) matchOwn(sc *scratch, b []byte) (form, n int) {
	form, n = -1, 0
	for k := range s.lists {
		l := &s.lists[k]
		if len(l.order) == 0 {
			continue
		}
		if f, m := l.walk(sc, b); m > n || m == n && m > 0 && f < form {
			form, n = f, m
		}
	}
	return max(form, 0), n
}

// walk is match over one list.
func (l *list) walk(sc *scratch, b []byte) (form, n int) {
	form = -1
	cur := sc.cur[:0]
	var ways [8]way
	for _, w := range l.ways(ways[:0], b) {
		// The run of forms that begin with w's bytes.
		if lo, hi := l.narrowWay(0, int32(len(l.olds)), 0, w); lo < hi {
			cur = append(cur, state{lo: lo, hi: hi, pos: w.n, depth: int32(w.k)})
		}
	}
	next := sc.nxt[:0]
	for len(cur) > 0 {
		next = next[:0]
		for _, st := range cur {
			// The forms that end here come first in the run: each is a
			// prefix of the others. Of equal ones, the first in the set.
			if len(l.olds[st.lo]) == int(st.depth) {
				if f, m := int(l.order[st.lo]), int(st.pos); m > n || m == n && f < form {
					form, n = f, m
				}
			}
			gaps := [3]int{}
			gs := gaps[:1] // none, unless l is wrapped
			if l.wrapped {
				gs = l.gaps(gaps[:0], b[st.pos:])
			}
			for _, g := range gs {
				at := st.pos + int32(g)
				for _, w := range l.ways(ways[:0], b[at:]) {
					lo, hi := l.narrowWay(st.lo, st.hi, st.depth, w)
					if lo == hi {
						continue
					}
					ns := state{lo: lo, hi: hi, pos: at + w.n, depth: st.depth + int32(w.k)}
					if !slices.Contains(next, ns) {
						next = append(next, ns)
					}
				}
			}
		}
		cur, next = next, cur
	}
	if cap(cur)+cap(next) != cap(sc.cur)+cap(sc.nxt) { // grown: keep the larger
		sc.cur, sc.nxt = cur[:0], next[:0]
	}
	return form, n
}

// narrowWay is narrow by each byte w writes, from depth on.
func (l *list) narrowWay(lo, hi int32, depth int32, w way) (int32, int32) {
	lo, hi = l.narrow(lo, hi, int(depth), w.b[0])
	for i := int32(1); i < int32(w.k) && lo < hi; i++ {
		lo, hi = l.narrow(lo, hi, int(depth+i), w.b[i])
	}
	return lo, hi
}

// narrow returns the run of l.olds[lo:hi] (which all share their first
// depth bytes) whose byte at depth is c: those only depth long come
// first in it, then the rest by that byte, so two binary searches find it.
func (l *list) narrow(lo, hi int32, depth int, c byte) (int32, int32) {
	olds := l.olds
	a, z := lo, hi
	for a < z { // the first that goes on with c or a later byte
		mid := int32(uint32(a+z) >> 1)
		if o := olds[mid]; len(o) > depth && o[depth] >= c {
			z = mid
		} else {
			a = mid + 1
		}
	}
	lo = a
	z = hi
	for a < z { // the first that goes on with a later byte
		mid := int32(uint32(a+z) >> 1)
		if olds[mid][depth] > c {
			z = mid
		} else {
			a = mid + 1
		}
	}
	return lo, a
}

// way is one way a source writes a character: its bytes b[:k] (one,
// or a non-ASCII character's UTF-8), in n bytes.
type way struct {
	b [utf8.UTFMax]byte
	k int8
	n int32
}

// one is the way that writes c in n bytes.
func one(c byte, n int) way { return way{b: [utf8.UTFMax]byte{c}, k: 1, n: int32(n)} }

// runeWay is the way that writes r in n bytes, as UTF-8.
func runeWay(r rune, n int) way {
	w := way{n: int32(n)}
	w.k = int8(utf8.EncodeRune(w.b[:], r))
	return w
}

// ways appends to w the ways b begins with a character, as l reads
// them: a byte as itself, and for escaped forms also escaped once
// (once) or twice (twice).
func (l *list) ways(w []way, b []byte) []way {
	if len(b) == 0 {
		return w
	}
	w = append(w, one(b[0], 1))
	if !l.escaped {
		return w
	}
	return escapedWays(w, b)
}

// escapedWays appends to w the ways b begins with a character written
// escaped, once or twice.
func escapedWays(w []way, b []byte) []way {
	switch b[0] {
	case '+':
		return append(w, one(' ', 1))
	case '%', '\\', '&':
		from := len(w)
		w = once(w, b)
		// Escaped twice, b begins with an escape's first byte escaped,
		// or with a backslash and one.
		again := b[0] == '\\' && len(b) >= 2 && intro[b[1]]
		for _, x := range w[from:] {
			again = again || x.k == 1 && intro[x.b[0]]
		}
		if again {
			w = twice(w, b, w[from:len(w):len(w)])
		}
	}
	return w
}

// intro are the bytes that begin an escape twice will read escaped.
var intro = [256]bool{'%': true, '\\': true, '&': true}

// once appends to w the ways b begins with one escape: as a URL writes
// a byte (%hh, and "+" for " "), as a JSON string writes a character
// (\u followed by four hex digits, a surrogate pair for one past
// U+FFFF, and \", \\ and \/) and as HTML or XML text does (a character
// reference: refBody). A character past ASCII is read as its UTF-8.
func once(w []way, b []byte) []way {
	switch b[0] {
	case '+':
		w = append(w, one(' ', 1))
	case '%':
		if len(b) >= 3 {
			if c := HexByte(b[1], b[2]); c >= 0 {
				w = append(w, one(byte(c), 3))
			}
		}
	case '\\':
		if len(b) >= 2 {
			if c := jsonEscapes[b[1]]; c != 0 {
				w = append(w, one(c, 2))
			}
		}
		if x, ok := uEscape(b[1:], false); ok {
			x.n++
			w = append(w, x)
		}
	case '&':
		if x, ok := refBody(b[1:]); ok {
			x.n++
			w = append(w, x)
		}
	}
	return w
}

// twice appends to w the ways b begins with a character escaped twice,
// as one layer escapes what another wrote: an escape whose first byte
// (\, % or &) is written as an escape itself, the rest as they are —
// \\u00e9 and \\\" (JSON in a JSON string), \u0026amp; (HTML in JSON
// from an encoder that escapes &), &amp;#39; (HTML text escaped again,
// as a feed's description holds a page), %2526 (a URL in a URL's
// query) — or JSON's \" \\ \/ with its second byte escaped (\&quot;:
// JSON in an HTML attribute). intros are once's ways of b. Each byte
// it writes then spans at most escapedSpan bytes of b.
func twice(w []way, b []byte, intros []way) []way {
	if b[0] == '\\' {
		w = jsonTwice(w, b[1:], 1)
	}
	for _, in := range intros {
		if in.k != 1 || int(in.n) >= len(b) {
			continue
		}
		rest := b[in.n:]
		switch in.b[0] {
		case '\\':
			w = jsonTwice(w, rest, int(in.n))
			if x, ok := uEscape(rest, true); ok {
				x.n += in.n
				w = append(w, x)
			}
		case '%':
			if len(rest) >= 2 {
				if c := HexByte(rest[0], rest[1]); c >= 0 {
					w = append(w, one(byte(c), int(in.n)+2))
				}
			}
		case '&':
			if x, ok := refBody(rest); ok {
				x.n += in.n
				w = append(w, x)
			}
		}
	}
	return w
}

// jsonTwice appends to w the ways rest, after a backslash written in
// intro bytes, ends JSON's \", \\ or \/: with its byte escaped once, or
// as itself when the backslash was escaped (intro is more than one).
func jsonTwice(w []way, rest []byte, intro int) []way {
	if len(rest) == 0 {
		return w
	}
	if intro > 1 && jsonEscapes[rest[0]] != 0 {
		w = append(w, one(rest[0], intro+1))
	}
	switch rest[0] {
	case '%', '\\', '&':
		var buf [4]way
		for _, x := range once(buf[:0], rest) {
			if x.k == 1 && jsonEscapes[x.b[0]] != 0 {
				w = append(w, one(x.b[0], intro+int(x.n)))
			}
		}
	}
	return w
}

// uEscape returns the character a JSON \u escape writes, b being what
// follows its backslash ("u" and four hex digits), and for a
// surrogate's first half, the second half's \u escape after it, its
// backslash written as itself, or when twice, escaped once (as JSON in a
// JSON string writes it). The way's n counts from b.
func uEscape(b []byte, twice bool) (way, bool) {
	r, ok := u4(b)
	if !ok {
		return way{}, false
	}
	if !utf16.IsSurrogate(r) {
		return runeWay(r, 5), true
	}
	if r >= 0xdc00 || len(b) < 6 {
		return way{}, false
	}
	n := 0 // the second backslash's bytes
	if !twice && b[5] == '\\' {
		n = 1
	}
	if twice {
		var buf [4]way
		for _, x := range once(buf[:0], b[5:]) {
			if x.k == 1 && x.b[0] == '\\' {
				n = int(x.n)
			}
		}
	}
	if r2, ok := u4(b[min(5+n, len(b)):]); n > 0 && ok && 0xdc00 <= r2 && r2 <= 0xdfff {
		return runeWay(utf16.DecodeRune(r, r2), 5+n+5), true
	}
	return way{}, false
}

// u4 reads "u" and four hex digits at the start of b.
func u4(b []byte) (rune, bool) {
	if len(b) < 5 || b[0] != 'u' {
		return 0, false
	}
	hi, lo := HexByte(b[1], b[2]), HexByte(b[3], b[4])
	if hi < 0 || lo < 0 {
		return 0, false
	}
	return rune(hi<<8 | lo), true
}

// jsonEscapes is, for each byte that may follow a backslash in a JSON
// string to write a printable one, that byte; 0 for none. (A value
// holds no control character: operator.CheckValue.)
var jsonEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/'}

// maxRef is the most bytes a character reference refBody reads spans
// for each byte of the UTF-8 it writes: as many as \u00hh, so an
// escaped form spans no more than it would without them. Every HTML
// escaper of note writes its references within it (&amp;, &quot;,
// &#39;, &#039;, &#x27;, &#43;, &#233;, &#xE9;, &#x4E2D;).
const maxRef = 6

// namedRefs are the named character references HTML and XML escapers
// write for ASCII bytes, as HTML reads them (its legacy upper-case
// names too), less their "&".
var namedRefs = [...]struct {
	name string
	c    byte
}{
	{"amp;", '&'}, {"AMP;", '&'}, {"lt;", '<'}, {"LT;", '<'}, {"gt;", '>'}, {"GT;", '>'},
	{"quot;", '"'}, {"QUOT;", '"'}, {"apos;", '\''},
}

// refBody returns the character a character reference writes, b being
// what follows its "&", and whether it is one: one of namedRefs, or a
// decimal (&#39;, &#039;, &#233;) or hex (&#x27;, &#X2f;, &#xE9;) one
// of at most maxRef bytes, its "&" included, for each byte of the
// character's UTF-8. The way's n counts from b.
func refBody(b []byte) (way, bool) {
	if len(b) < 3 {
		return way{}, false
	}
	if b[0] != '#' {
		for _, r := range namedRefs {
			if b[0] == r.name[0] && len(b) >= len(r.name) && string(b[:len(r.name)]) == r.name {
				return one(r.c, len(r.name)), true
			}
		}
		return way{}, false
	}
	i, base := 1, 10
	if b[1] == 'x' || b[1] == 'X' {
		i, base = 2, 16
	}
	v, j := 0, i
	for ; j < len(b) && b[j] != ';'; j++ {
		d := unhex(b[j])
		if d < 0 || d >= base || j >= maxRef*utf8.UTFMax {
			return way{}, false
		}
		v = v*base + d
		if v > utf8.MaxRune {
			return way{}, false
		}
	}
	if j == i || j >= len(b) || utf16.IsSurrogate(rune(v)) {
		return way{}, false
	}
	x := runeWay(rune(v), j+1)
	if 1+int(x.n) > maxRef*int(x.k) {
		return way{}, false
	}
	return x, true
}

// gaps appends to g how many bytes at the start of b may come between
// two bytes of an occurrence, as l reads them: none, and for a wrapped
// list a line break ("\n", "\r" or "\r\n", each byte also JSON- or
// percent-escaped when l is escaped).
func (l *list) gaps(g []int, b []byte) []int {
	g = append(g, 0)
	if !l.wrapped {
		return g
	}
	c, n := l.lineBreak(b)
	if n == 0 {
		return g
	}
	g = append(g, n)
	if c == '\r' {
		if c2, n2 := l.lineBreak(b[n:]); c2 == '\n' {
			g = append(g, n+n2)
		}
	}
	return g
}

// lineBreak returns the line-break byte ('\r' or '\n') b begins with,
// as l reads it, and how many bytes it spans; 0 for none.
func (l *list) lineBreak(b []byte) (byte, int) {
	if len(b) == 0 {
		return 0, 0
	}
	switch c := b[0]; {
	case c == '\r' || c == '\n':
		return c, 1
	case !l.escaped:
	case c == '\\' && len(b) >= 2 && (b[1] == 'r' || b[1] == 'n'):
		if b[1] == 'r' {
			return '\r', 2
		}
		return '\n', 2
	case c == '%' && len(b) >= 3:
		if h := HexByte(b[1], b[2]); h == '\r' || h == '\n' {
			return byte(h), 3
		}
	}
	return 0, 0
}
