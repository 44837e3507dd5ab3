package proxy

import (
	"bytes"
	"slices"
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
		if f, m := s.walk(sc, l, b); m > n || m == n && m > 0 && f < form {
			form, n = f, m
		}
	}
	return max(form, 0), n
}

// walk is match over one list.
func (s *FormSet) walk(sc *scratch, l *list, b []byte) (form, n int) {
	form = -1
	cur := sc.cur[:0]
	var ways [4]way
	for _, w := range l.ways(ways[:0], b) {
		// The run of forms that begin with w.c: narrow at depth 0.
		if lo, hi := l.narrow(0, int32(len(l.olds)), 0, w.c); lo < hi {
			cur = append(cur, state{lo: lo, hi: hi, pos: int32(w.n)})
		}
	}
	next := sc.nxt[:0]
	for depth := 1; len(cur) > 0; depth++ {
		next = next[:0]
		for _, st := range cur {
			// The forms that end here come first in the run: each is a
			// prefix of the others. Of equal ones, the first in the set.
			if len(l.olds[st.lo]) == depth {
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
					lo, hi := l.narrow(st.lo, st.hi, depth, w.c)
					if lo == hi {
						continue
					}
					ns := state{lo: lo, hi: hi, pos: at + int32(w.n)}
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

// way is one way a source writes a byte: c, in n bytes.
type way struct {
	c byte
	n int
}

// ways appends to w the ways b begins with a byte, as l reads them: as
// itself, and for escaped forms also as a URL writes it (%hh, and "+"
// for " "), as a JSON string does (\u00hh, \", \\ and \/) and as HTML
// or XML text does (a character reference: charRef).
func (l *list) ways(w []way, b []byte) []way {
	if len(b) == 0 {
		return w
	}
	w = append(w, way{b[0], 1})
	if !l.escaped {
		return w
	}
	switch b[0] {
	case '+':
		w = append(w, way{' ', 1})
	case '%':
		if len(b) >= 3 {
			if c := HexByte(b[1], b[2]); c >= 0 {
				w = append(w, way{byte(c), 3})
			}
		}
	case '\\':
		if len(b) >= 2 {
			if c := jsonEscapes[b[1]]; c != 0 {
				w = append(w, way{c, 2})
			}
		}
		if len(b) >= 6 && b[1] == 'u' && HexByte(b[2], b[3]) == 0 {
			if c := HexByte(b[4], b[5]); c >= 0 {
				w = append(w, way{byte(c), 6})
			}
		}
	case '&':
		if c, n := charRef(b); n > 0 {
			w = append(w, way{c, n})
		}
	}
	return w
}

// jsonEscapes is, for each byte that may follow a backslash in a JSON
// string to write a printable one, that byte; 0 for none. (A value
// holds no control character: operator.CheckValue.)
var jsonEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/'}

// maxRef is the most bytes a character reference charRef reads spans:
// as many as \u00hh, so an escaped form spans no more than it would
// without them. Every HTML escaper of note writes its references within
// it (&amp;, &quot;, &#39;, &#039;, &#x27;, &#43;).
const maxRef = 6

// namedRefs are the named character references HTML and XML escapers
// write for ASCII bytes, as HTML reads them (its legacy upper-case
// names too).
var namedRefs = [...]struct {
	name string
	c    byte
}{
	{"&amp;", '&'}, {"&AMP;", '&'}, {"&lt;", '<'}, {"&LT;", '<'}, {"&gt;", '>'}, {"&GT;", '>'},
	{"&quot;", '"'}, {"&QUOT;", '"'}, {"&apos;", '\''},
}

// charRef returns the ASCII byte b begins with as an HTML character
// reference of at most maxRef bytes, and how many bytes it spans: one of
// namedRefs, or a decimal (&#39;, &#039;) or hex (&#x27;, &#X2f;) one;
// 0 for none.
func charRef(b []byte) (byte, int) {
	if len(b) < 4 {
		return 0, 0
	}
	if b[1] != '#' {
		for _, r := range namedRefs {
			if len(b) >= len(r.name) && b[1] == r.name[1] && string(b[:len(r.name)]) == r.name {
				return r.c, len(r.name)
			}
		}
		return 0, 0
	}
	i, base := 2, 10
	if b[2] == 'x' || b[2] == 'X' {
		i, base = 3, 16
	}
	v, j := 0, i
	for ; j < len(b) && j < maxRef-1 && b[j] != ';'; j++ {
		d := unhex(b[j])
		if d < 0 || d >= base {
			return 0, 0
		}
		v = v*base + d
	}
	if j == i || j >= len(b) || b[j] != ';' || v >= utf8.RuneSelf {
		return 0, 0
	}
	return byte(v), j + 1
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
