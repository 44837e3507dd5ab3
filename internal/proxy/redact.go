package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// redactFirst is how much a Redactor first reads from its source at a
// time; once a read fills that, it reads up to redactChunk at a time. A
// small answer (most of them) never needs the larger buffer.
const (
	redactFirst = 2 << 10
	redactChunk = 32 << 10
)

// A Form is one string a Redactor replaces, and what it puts in its place.
type Form struct {
	// Old is the string to find. An empty Old is ignored.
	Old []byte
	// New replaces each occurrence of Old.
	New []byte
	// Escaped, when true, also finds Old with any of its bytes written
	// as a percent-escape (%2F or %2f, with any reserved set: a byte
	// escaped that need not be is found too), as a JSON escape (\u002F,
	// either case, and \/ for "/"), or, for a space, as "+". Each byte
	// then spans up to six bytes of the source, so Old may span
	// 6*len(Old).
	Escaped bool
	// Wrapped, when true, also finds Old with a line break between any
	// two of its bytes, as base64 is wrapped every 60 or 76 characters
	// (GitHub's contents and Git Data APIs, MIME): "\n", "\r" or
	// "\r\n", and for an Escaped form each of those two bytes also as
	// its JSON escape (a backslash and n or r) or its percent-escape
	// (%0A, %0d). Each gap then spans up to two bytes (six when
	// Escaped), so Old may span that much more between each two of its
	// bytes. A break before Old's first byte or after its last is no
	// part of an occurrence.
	Wrapped bool
	// Own, when true, replaces each occurrence by the own string of
	// the set searched with (FormSet.WithOwn) instead of New: one set
	// made once then serves every request of a box, each with the
	// box's own token in the value's place, without keeping the token.
	Own bool
}

// span is the most bytes an occurrence of f can span in the source.
func (f Form) span() int {
	per := 1
	if f.Escaped {
		per = 6
	}
	n := per * len(f.Old)
	if f.Wrapped && len(f.Old) > 1 {
		n += maxGap(f.Escaped) * (len(f.Old) - 1)
	}
	return n
}

// maxGap is the most bytes a line break inside a Wrapped form spans:
// two line-break bytes, each as itself, or escaped in three bytes at
// most (%0A).
func maxGap(escaped bool) int {
	if escaped {
		return 6
	}
	return 2
}

// Redactor is an io.ReadCloser that copies a source with every occurrence
// of its forms replaced, while holding only a bounded amount of the
// source in memory. With one form that is not Escaped, its output is
// bytes.ReplaceAll's over the whole stream. With several, the source is
// scanned from the start: at each position the longest form found there
// is replaced (of forms found there equally long, the first in the set)
// and the scan resumes after it; where none is found, the byte is passed
// on.
//
// An occurrence split across the source's reads is still caught: the
// Redactor always holds back the last Window() bytes of what it has read,
// whatever they are, and passes on the rest. So what reaches the reader,
// and when, depends only on how many bytes the source has yielded, and on
// whole occurrences replaced, never on whether the source ends with part
// of a form: the cut is no oracle for the value a form holds. The cost
// is that a stream's last Window() bytes wait for more of it, or for its
// end.
//
// When the source ends with io.EOF the held tail is passed on, replaced,
// since it can no longer grow. When it fails with any other error the
// held tail is dropped, not passed on, and the error is returned. Memory
// is bounded by the held tail, one read of 32 KiB, and the same read with
// its occurrences replaced.
//
// A Redactor is not safe for concurrent use.
type Redactor struct {
	src io.ReadCloser
	set *FormSet
	sc  scratch

	pending []byte // read from src, not yet passed on; cap window+redactFirst (or pooledCap), then +redactChunk
	out     []byte // passed on, not yet returned by Read: own, or pending[:keep]
	own     []byte // the buffer out is built in when occurrences may be replaced
	keep    int    // pending[:keep] is out, passed on in place; dropped once read
	off     int    // out[:off] has been returned
	err     error  // src's error, returned once out is drained
	n       int    // occurrences replaced
	events  bool   // pass on each whole event of a stream at once (PassEvents)
	onEnd   func(replaced int)
}

// NewRedactor returns a Redactor reading src and replacing every old with
// new, as bytes.ReplaceAll would. An empty old replaces nothing. Closing
// the Redactor closes src.
func NewRedactor(src io.ReadCloser, old, new []byte) *Redactor {
	return NewFormRedactor(src, []Form{{Old: old, New: new}})
}

// NewFormRedactor returns a Redactor reading src and replacing every form
// in forms. Forms with an empty Old are ignored; with none left, it
// passes src on unchanged. Closing the Redactor closes src.
func NewFormRedactor(src io.ReadCloser, forms []Form) *Redactor {
	return NewFormSet(forms).Redactor(src)
}

// Redactor returns a Redactor reading src and replacing every form of s.
// Closing the Redactor closes src.
func (s *FormSet) Redactor(src io.ReadCloser) *Redactor {
	r := &Redactor{src: src, set: s}
	if s.total > 0 {
		if s.window+redactFirst <= pooledCap {
			r.pending = getBuf()
		} else {
			r.pending = make([]byte, 0, s.window+redactFirst)
		}
		r.sc = s.newScratch()
	}
	return r
}

// pooledCap is the capacity of the buffers Redactors share through
// bufs: the first read's buffer, when the window is at most 1 KiB.
// A Redactor takes one as it starts and gives it back when its source has ended and all it
// passed on is read, on the goroutine that reads it; one never read to
// its end (closed early, or failed) leaves them to the collector.
const pooledCap = redactFirst + 1<<10

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, pooledCap); return &b }}

func getBuf() []byte { return (*bufs.Get().(*[]byte))[:0] }

// putBuf gives b back when it is one of the pool's.
func putBuf(b []byte) {
	if cap(b) == pooledCap {
		bufs.Put(&b)
	}
}

// release gives the Redactor's buffers back: its source has ended and
// everything it passed on has been read.
func (r *Redactor) release() {
	putBuf(r.pending)
	r.pending, r.out, r.off, r.keep = nil, nil, 0, 0
}

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
// can begin with.
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
}

// Classes of a byte as the first of an occurrence.
const (
	classNone   = iota // no occurrence starts with it
	classAlways        // one may, whatever follows
	classPair          // one may, when the pair it begins is in pairs
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
	f = Form{Old: bytes.Clone(f.Old), New: bytes.Clone(f.New), Escaped: f.Escaped, Wrapped: f.Wrapped, Own: f.Own}
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

// Len is how many forms s holds.
func (s *FormSet) Len() int { return s.total }

// Window is how many bytes of what it has read a Redactor of s always
// holds back until its source yields more or ends.
func (s *FormSet) Window() int { return s.window }

// scratch is a search's own state, apart from the FormSet it searches
// for, which many searches share.
type scratch struct {
	next     []int   // nextOwn's memo, one per start byte
	cur, nxt []state // match's states
	// With a rest: at is where nextOwn and rest's nextStart last found
	// a start (-2 for not yet searched, -1 for none before the cut), and
	// rest is rest's own scratch.
	at   [2]int
	rest *scratch
}

// newScratch is a new search's state for s.
func (s *FormSet) newScratch() scratch {
	sc := scratch{next: s.unsearched(), at: [2]int{-2, -2}}
	if s.rest != nil {
		r := s.rest.newScratch()
		sc.rest = &r
	}
	return sc
}

// reset readies sc for a search of other data, or to another cut.
func (sc *scratch) reset() {
	for k := range sc.next {
		sc.next[k] = -2
	}
	sc.at = [2]int{-2, -2}
	if sc.rest != nil {
		sc.rest.reset()
	}
}

// state is one way a match is still possible: the run [lo, hi) of a
// list whose forms all begin with what was read so far, which ends at pos.
type state struct{ lo, hi, pos int32 }

// nextStart returns the index of the first byte of data[i:cut] at which
// some occurrence of a form of s or its rest can start, or -1. It
// remembers where each found one, so that neither searches the same
// stretch twice while the other's starts come first.
func (s *FormSet) nextStart(sc *scratch, data []byte, i, cut int) int {
	if s.rest == nil {
		return s.nextOwn(sc, data, i, cut)
	}
	return s.nextChained(sc, data, i, cut)
}

// nextChained is nextStart of a set with a rest.
func (s *FormSet) nextChained(sc *scratch, data []byte, i, cut int) int {
	if at := sc.at[0]; at == -2 || at >= 0 && at < i {
		sc.at[0] = s.nextOwn(sc, data, i, cut)
	}
	if at := sc.at[1]; at == -2 || at >= 0 && at < i {
		sc.at[1] = s.rest.nextStart(sc.rest, data, i, cut)
	}
	j, k := sc.at[0], sc.at[1]
	if j < 0 || k >= 0 && k < j {
		return k
	}
	return j
}

// nextOwn returns the index of the first byte of data[i:cut] at which
// some occurrence of a form of s (not its rest) can start, or -1. With few start bytes it searches for
// each with bytes.IndexByte, far faster than a loop over the bytes, and
// remembers where each was found (next, one per start byte, -2 for not
// yet searched and -1 for none before cut), so no byte is searched for
// twice over the same stretch. With more, it reads each byte's class,
// and for a byte that begins a pair, the pair.
func (s *FormSet) nextOwn(sc *scratch, data []byte, i, cut int) int {
	if len(s.starts) > fewStarts {
		for j := i; j < cut; j++ {
			switch s.class[data[j]] {
			case classAlways:
				return j
			case classPair:
				if j+1 >= len(data) {
					return j
				}
				p := uint16(data[j])<<8 | uint16(data[j+1])
				if s.pairs[p/64]&(1<<(p%64)) != 0 {
					return j
				}
			}
		}
		return -1
	}
	best := -1
	for k, c := range s.starts {
		if at := sc.next[k]; at != -1 && at < i {
			if x := bytes.IndexByte(data[i:cut], c); x >= 0 {
				sc.next[k] = i + x
			} else {
				sc.next[k] = -1
			}
		}
		if at := sc.next[k]; at >= 0 && (best < 0 || at < best) {
			best = at
		}
	}
	return best
}

// RedactAnswer puts a Redactor of s, reading body (resp.Body or a
// wrapper of it), in place of resp's body: an event stream's whole
// events pass at once, and when the body ends resp's trailer is redacted
// and replaced is told how many forms the body held, if any. The
// answer's length changes wherever a form is replaced, so it is
// streamed.
func (s *FormSet) RedactAnswer(resp *http.Response, body io.ReadCloser, replaced func(n int)) {
	r := s.Redactor(body)
	if IsEventStream(resp.Header) {
		r.PassEvents() // each event as it ends, not when the next comes
	}
	r.OnEnd(func(n int) {
		s.RedactHeader(resp.Trailer)
		if n > 0 {
			replaced(n)
		}
	})
	resp.Body = r
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
}

// PassEvents makes the Redactor pass on every whole event of a
// text/event-stream at once: what it has read up to the end of the last
// blank line it has read is not held back, and only what follows that is
// held as usual. An occurrence of a form can still not be split by it,
// since no form holds a line break (PassEvents does nothing when one
// does), and where the cut falls still depends only on the stream's own
// framing and byte count, never on what a form holds. Without it, a
// stream's last event waits for the next one whenever it is shorter than
// the window.
func (r *Redactor) PassEvents() {
	r.events = !r.set.breaks
}

// IsEventStream reports whether h is the header of a text/event-stream
// answer.
func IsEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}

// eventsEnd returns how many bytes of b end with its last blank line
// ("\n\n", "\r\r" or "\r\n\r\n"), 0 for none.
func eventsEnd(b []byte) int {
	end := 0
	for _, sep := range [...]string{"\n\n", "\r\r", "\r\n\r\n"} {
		if i := bytes.LastIndex(b, []byte(sep)); i >= 0 {
			end = max(end, i+len(sep))
		}
	}
	return end
}

// Window is how many bytes of what it has read the Redactor always holds
// back until its source yields more or ends.
func (r *Redactor) Window() int { return r.set.window }

// Replaced reports how many occurrences the Redactor has replaced so far.
func (r *Redactor) Replaced() int { return r.n }

// OnEnd has f called once, with how many occurrences were replaced, when
// Read first returns io.EOF: the source has ended, and an HTTP answer's
// trailers are all there, for the caller to clean as it cleaned the
// header.
func (r *Redactor) OnEnd(f func(replaced int)) { r.onEnd = f }

// Read reads the source with every occurrence of the forms replaced.
func (r *Redactor) Read(p []byte) (int, error) {
	n, err := r.read(p)
	if err == io.EOF && r.onEnd != nil {
		f := r.onEnd
		r.onEnd = nil
		f(r.n)
	}
	return n, err
}

func (r *Redactor) read(p []byte) (int, error) {
	if r.set.total == 0 {
		return r.src.Read(p)
	}
	for r.off == len(r.out) {
		if r.err != nil {
			if r.pending != nil {
				r.release()
			}
			return 0, r.err
		}
		if r.keep > 0 {
			// What was passed on in place is read: drop it.
			r.pending = r.pending[:copy(r.pending, r.pending[r.keep:])]
			r.keep = 0
		}
		r.out, r.off = nil, 0
		n, err := r.src.Read(r.pending[len(r.pending):cap(r.pending)])
		r.pending = r.pending[:len(r.pending)+n]
		if full := r.set.window + redactChunk; len(r.pending) == cap(r.pending) && cap(r.pending) < full {
			// The answer comes faster than the first buffer takes it.
			first := r.pending
			r.pending = append(make([]byte, 0, full), r.pending...)
			putBuf(first)
		}
		if err != nil {
			r.err = err
		}
		switch {
		case err == nil || errors.Is(err, io.EOF):
			r.pass(err != nil)
		default:
			// Broken stream: pass on what precedes the window, and drop
			// the window, which might hold the start of an occurrence.
			r.pass(false)
			r.pending = r.pending[:0]
		}
		if n == 0 && err == nil && len(r.out) == 0 {
			return 0, nil
		}
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

// pass moves pending to out with every occurrence replaced, holding back
// the last window bytes unless final.
func (r *Redactor) pass(final bool) {
	data := r.pending
	cut := len(data)
	if !final {
		cut -= r.set.window
		if r.events {
			cut = max(cut, eventsEnd(data))
		}
	}
	if cut > 0 && r.set.absent(&r.sc, data, cut) {
		// No occurrence starts before the cut: pass it on in place,
		// with no copy.
		r.out, r.keep = data[:cut], cut
		return
	}
	var i, n int
	r.own, i, n = r.set.replace(&r.sc, r.own[:0], data, cut)
	r.out = r.own
	r.n += n
	r.pending = r.pending[:copy(r.pending, data[i:])]
}

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
			if f := s.form(k); f.Own {
				out = append(out, s.own...)
			} else {
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
// itself, and for escaped forms also as %hh, \u00hh, \/ for "/" and "+"
// for " ".
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
		if len(b) >= 2 && b[1] == '/' {
			w = append(w, way{'/', 2})
		}
		if len(b) >= 6 && b[1] == 'u' && HexByte(b[2], b[3]) == 0 {
			if c := HexByte(b[4], b[5]); c >= 0 {
				w = append(w, way{byte(c), 6})
			}
		}
	}
	return w
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
// of h, and deletes every header whose name holds one. It returns how
// many headers it changed.
func (s *FormSet) RedactHeader(h http.Header) int {
	return rewriteHeader(h, s.RedactString)
}

// Close closes the source.
func (r *Redactor) Close() error { return r.src.Close() }

// ReplaceValue replaces old with new in every value of h, and deletes
// every header whose name holds old. It returns how many headers it
// changed. An empty old changes nothing.
func ReplaceValue(h http.Header, old, new string) int {
	if old == "" {
		return 0
	}
	return rewriteHeader(h, func(v string) (string, int) {
		if !strings.Contains(v, old) {
			return v, 0
		}
		return strings.ReplaceAll(v, old, new), 1
	})
}

// rewriteHeader puts replace(v) in place of every value v of h that
// replace changes (reports a count above zero for), and deletes every
// header whose name it would change. It returns how many headers it
// changed.
func rewriteHeader(h http.Header, replace func(string) (string, int)) int {
	n := 0
	for k, vs := range h {
		if _, m := replace(k); m > 0 {
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
