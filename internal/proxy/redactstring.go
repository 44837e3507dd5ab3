package proxy

import (
	"net/http"
)

// HexByte returns the byte two hex digits spell, either case, or -1.
func HexByte(hi, lo byte) int {
	h, l := unhex(hi), unhex(lo)
	if h < 0 || l < 0 {
		return -1
	}
	return h<<4 | l
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// RedactString returns s with every occurrence of forms replaced, as a
// Redactor reading s would, and how many it replaced.
func RedactString(s string, forms []Form) (string, int) {
	return NewFormSet(forms).RedactString(s)
}

// RedactString returns str with every occurrence of the set's forms
// replaced, as a Redactor reading str would, and how many it replaced.
func (s *FormSet) RedactString(str string) (string, int) {
	if s.total == 0 {
		return str, 0
	}
	b := []byte(str)
	sc := s.newScratch()
	if s.nextStart(&sc, b, 0, len(b)) < 0 {
		return str, 0
	}
	out, _, n := s.replace(&sc, nil, b, len(b))
	if n == 0 {
		return str, 0
	}
	return string(out), n
}

// unsearched is a new nextStart memo for s (nil when s reads the pair
// table instead).
func (s *FormSet) unsearched() []int {
	if len(s.starts) > fewStarts {
		return nil
	}
	next := make([]int, len(s.starts))
	for k := range next {
		next[k] = -2
	}
	return next
}

// RedactHeader replaces every occurrence of forms in the values of h, and
// deletes every header whose name holds one. It returns how many headers
// it changed.
func RedactHeader(h http.Header, forms []Form) int {
	return NewFormSet(forms).RedactHeader(h)
}

// RedactHeader replaces every occurrence of the set's forms in the values
// of h, and deletes every header whose name holds one, in any case: a
// transport writes a name in its canonical case (X-Sk_live_…), which
// would hide a form from a search that minds case. It returns how many
// headers it changed.
func (s *FormSet) RedactHeader(h http.Header) int {
	return rewriteHeader(h, s.RedactString, s.nameHolds)
}

// nameHolds reports whether name, a header's, holds one of the set's
// forms, ASCII case aside.
func (s *FormSet) nameHolds(name string) bool {
	for t := s; t != nil; t = t.rest {
		for _, f := range t.forms {
			if len(f.Old) <= len(name) && containsFold(name, f.Old) {
				return true
			}
		}
	}
	return false
}

// containsFold reports whether s holds sub, ASCII case aside.
func containsFold(s string, sub []byte) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) && lower(s[i+j]) == lower(sub[j]) {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Close closes the source.
func (r *Redactor) Close() error { return r.src.Close() }

// rewriteHeader puts replace(v) in place of every value v of h that
// replace changes (reports a count above zero for), and deletes every
// header whose name it would change, or that holds reports true for
// (when it is not nil). It returns how many headers it changed.
func rewriteHeader(h http.Header, replace func(string) (string, int), holds func(name string) bool) int {
	n := 0
	for k, vs := range h {
		if _, m := replace(k); m > 0 || holds != nil && holds(k) {
			delete(h, k)
			n++
			continue
		}
		changed := false
		for i, v := range vs {
			if out, m := replace(v); m > 0 {
				vs[i] = out
				changed = true
			}
		}
		if changed {
			n++
		}
	}
	return n
}
