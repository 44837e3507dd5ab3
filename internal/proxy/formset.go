package proxy

import (
	"bytes"
	"slices"
)

// FormSet is a set of forms made ready to be searched for at once: made
// once, it serves any number of Redactors, RedactString and RedactHeader
// calls, concurrently, since nothing changes it after NewFormSet.
//
// A search finds, at each position of its input, every form that can
// start there in one walk, however many forms there are: the forms are
// kept sorted, and each byte read (or escape, for an Escaped form)
// narrows the range of those still possible by binary search, as a
// trie's walk would. Positions where no form can start are skipped
// without a walk: with few bytes that start a form, by bytes.IndexByte
// for each; with more, by a table of the pairs of bytes an occurrence
// can begin with, and at an "&" by the byte the character reference it
// begins names (an HTML page holds many that begin no form).
type FormSet struct {
	forms  []Form
	window int     // the longest span less one
	lists  [4]list // by listOf: plain, Escaped, Wrapped, both
	breaks bool    // some form holds a line break
	own    []byte  // replaces the Own forms (WithOwn)
	// rest is searched after forms (With): its forms' places in the set
	// follow theirs. total is how many forms the two hold.
	rest  *FormSet
	total int

	starts []byte    // the bytes an occurrence can start with
	class  [256]byte // how a byte is judged as an occurrence's first: see the class constants
	pairs  *[1 << 16 / 64]uint64
	// refFirst are the first bytes of Escaped forms: an occurrence may
	// start with a character reference (&#39;) of one of them; with a
	// named one (&quot;) only when refNamed.
	refFirst [256]bool
	refNamed bool
}

// Classes of a byte as the first of an occurrence.
const (
	classNone   = iota // no occurrence starts with it
	classAlways        // one may, whatever follows
	classPair          // one may, when the pair it begins is in pairs, or it begins a character reference of a byte in refFirst
)

// fewStarts is how many bytes that start a form are searched for with
// bytes.IndexByte each; with more, the pair table is read instead.
const fewStarts = 4

// listOf is the index of the list of a FormSet that holds f: 1 for
// Escaped, plus 2 for Wrapped.
func listOf(f Form) int {
	k := 0
	if f.Escaped {
		k |= 1
	}
	if f.Wrapped {
		k |= 2
	}
	return k
}

// list is some of a FormSet's forms sorted by Old (and, for equal Olds,
// by their place in the set). Every prefix of Old the forms share is
// then one run of it, found by narrow (the first byte's too).
type list struct {
	order   []int32  // the forms' places in the set
	olds    [][]byte // their Olds, in the same order
	escaped bool
	wrapped bool // a line break may come between any two bytes
}

// NewFormSet returns the set of forms, ready to search for. Forms with an
// empty Old are ignored. Of forms found at one position equally long,
// the first in forms is replaced.
func NewFormSet(forms []Form) *FormSet {
	s := &FormSet{}
	for _, f := range forms {
		if len(f.Old) == 0 {
			continue
		}
		s.addForm(f)
	}
	for k := range s.lists {
		s.lists[k].escaped, s.lists[k].wrapped = k&1 != 0, k&2 != 0
	}
	for i, f := range s.forms {
		l := &s.lists[listOf(f)]
		l.order = append(l.order, int32(i))
	}
	for k := range s.lists {
		l := &s.lists[k]
		slices.SortStableFunc(l.order, func(a, b int32) int { return bytes.Compare(s.forms[a].Old, s.forms[b].Old) })
		for _, f := range l.order {
			l.olds = append(l.olds, s.forms[f].Old)
		}
	}
	s.total = len(s.forms)
	s.tabulate()
	return s
}

// addForm appends a copy of f to s.forms, and takes its span and
// line breaks into account; s is not yet shared.
func (s *FormSet) addForm(f Form) {
	f = Form{Old: bytes.Clone(f.Old), New: bytes.Clone(f.New), Escaped: f.Escaped, Wrapped: f.Wrapped, Own: f.Own, Fill: f.Fill}
	s.forms = append(s.forms, f)
	s.window = max(s.window, f.span()-1)
	if bytes.ContainsAny(f.Old, "\r\n") {
		s.breaks = true
	}
}

// WithOwn returns s with own as the string that replaces an occurrence
// of its Own forms. It shares all else with s, and costs a few hundred
// bytes whatever s holds.
func (s *FormSet) WithOwn(own []byte) *FormSet {
	t := *s
	t.own = bytes.Clone(own)
	return &t
}

// With returns the set of extra followed by s's forms, as NewFormSet of
// them would (of forms equally long found at one position, extra's
// first), with s's own string. Forms with an empty Old are ignored. It
// makes a set of extra alone, and searches s after it at each position:
// its cost is extra's, whatever s holds; with no extra it is s.
func (s *FormSet) With(extra []Form) *FormSet {
	t := NewFormSet(extra)
	if t.total == 0 {
		return s
	}
	t.rest, t.own = s, s.own
	t.total += s.total
	t.window = max(t.window, s.window)
	t.breaks = t.breaks || s.breaks
	return t
}

// tabulate fills starts, class and pairs: the bytes, and pairs of bytes,
// an occurrence of some form can begin with in the source. The pair
// table (8 KiB) is made only when a search reads it, with more than
// fewStarts start bytes: a set of one plain form (a credential masked
// in an answer, made once a call) never needs it.
func (s *FormSet) tabulate() {
	always := func(c byte) { s.class[c] = classAlways }
	var buf [16]uint16
	pairs := buf[:0]
	pair := func(a, b byte) {
		if s.class[a] == classNone {
			s.class[a] = classPair
		}
		pairs = append(pairs, uint16(a)<<8|uint16(b))
	}
	for _, f := range s.forms {
		// The ways the source can write Old's first byte, and its second.
		firsts := []byte{f.Old[0]}
		if f.Escaped {
			always('%')
			always('\\')
			// A character reference, whose byte nextOwn judges.
			if s.class['&'] == classNone {
				s.class['&'] = classPair
			}
			s.refFirst[f.Old[0]] = true
			for _, r := range namedRefs {
				s.refNamed = s.refNamed || r.c == f.Old[0]
			}
			if f.Old[0] == ' ' {
				firsts = append(firsts, '+')
			}
		}
		for _, a := range firsts {
			if len(f.Old) == 1 {
				always(a)
				continue
			}
			pair(a, f.Old[1])
			if f.Escaped {
				pair(a, '%')
				pair(a, '\\')
				pair(a, '&')
				if f.Old[1] == ' ' {
					pair(a, '+')
				}
			}
			if f.Wrapped {
				pair(a, '\r')
				pair(a, '\n')
			}
		}
	}
	for c := range 256 {
		if s.class[c] != classNone {
			s.starts = append(s.starts, byte(c))
		}
	}
	if len(s.starts) > fewStarts && len(pairs) > 0 {
		s.pairs = new([1 << 16 / 64]uint64)
		for _, i := range pairs {
			s.pairs[i/64] |= 1 << (i % 64)
		}
	}
}
