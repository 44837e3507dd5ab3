package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
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
}

// span is the most bytes an occurrence of f can span in the source.
func (f Form) span() int {
	if f.Escaped {
		return 6 * len(f.Old)
	}
	return len(f.Old)
}

// Redactor is an io.ReadCloser that copies a source with every occurrence
// of its forms replaced, while holding only a bounded amount of the
// source in memory. With one form that is not Escaped, its output is
// bytes.ReplaceAll's over the whole stream. With several, the source is
// scanned from the start: at each position the longest form found there
// is replaced and the scan resumes after it; where none is found, the
// byte is passed on.
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
	src    io.ReadCloser
	forms  []Form
	window int    // bytes always held back: the longest span less one
	starts []byte // the bytes an occurrence of some form can start with
	next   []int  // pass's scratch for nextStart, one per start byte

	pending []byte // read from src, not yet passed on; cap window+redactFirst, then +redactChunk
	out     []byte // passed on, not yet returned by Read
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
	r := &Redactor{src: src}
	for _, f := range forms {
		if len(f.Old) == 0 {
			continue
		}
		f = Form{Old: bytes.Clone(f.Old), New: bytes.Clone(f.New), Escaped: f.Escaped}
		r.forms = append(r.forms, f)
		r.window = max(r.window, f.span()-1)
		c := f.Old[0]
		r.addStart(c)
		if f.Escaped {
			r.addStart('%')
			r.addStart('\\')
			if c == ' ' {
				r.addStart('+')
			}
		}
	}
	if len(r.forms) > 0 {
		r.pending = make([]byte, 0, r.window+redactFirst)
		r.next = make([]int, len(r.starts))
	}
	return r
}

func (r *Redactor) addStart(c byte) {
	if bytes.IndexByte(r.starts, c) < 0 {
		r.starts = append(r.starts, c)
	}
}

// nextStart returns the index of the first byte of data[i:cut] that some
// form can start with, or -1. It searches for each such byte with
// bytes.IndexByte, far faster than a loop over the bytes, and remembers
// where each was found (next, one per start byte, -2 for not yet
// searched and -1 for none before cut), so no byte is searched for twice
// over the same stretch.
func (r *Redactor) nextStart(data []byte, i, cut int) int {
	best := -1
	for k, c := range r.starts {
		if at := r.next[k]; at != -1 && at < i {
			if x := bytes.IndexByte(data[i:cut], c); x >= 0 {
				r.next[k] = i + x
			} else {
				r.next[k] = -1
			}
		}
		if at := r.next[k]; at >= 0 && (best < 0 || at < best) {
			best = at
		}
	}
	return best
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
	for _, f := range r.forms {
		if bytes.ContainsAny(f.Old, "\r\n") {
			return
		}
	}
	r.events = true
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
func (r *Redactor) Window() int { return r.window }

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
	if len(r.forms) == 0 {
		return r.src.Read(p)
	}
	for r.off == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.off = r.out[:0], 0
		n, err := r.src.Read(r.pending[len(r.pending):cap(r.pending)])
		r.pending = r.pending[:len(r.pending)+n]
		if full := r.window + redactChunk; len(r.pending) == cap(r.pending) && cap(r.pending) < full {
			// The answer comes faster than the first buffer takes it.
			r.pending = append(make([]byte, 0, full), r.pending...)
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
		cut -= r.window
		if r.events {
			cut = max(cut, eventsEnd(data))
		}
	}
	for k := range r.next {
		r.next[k] = -2
	}
	i := 0
	for i < cut {
		j := r.nextStart(data, i, cut)
		if j < 0 {
			r.out = append(r.out, data[i:cut]...)
			i = cut
			break
		}
		// Before the cut, every form's whole span is in data.
		if k, n := r.match(data[j:]); n > 0 {
			r.out = append(r.out, data[i:j]...)
			r.out = append(r.out, r.forms[k].New...)
			i = j + n
			r.n++
			continue
		}
		r.out = append(r.out, data[i:j+1]...)
		i = j + 1
	}
	r.pending = r.pending[:copy(r.pending, data[i:])]
}

// match returns the form found longest at the start of b, and how many
// bytes of b it spans (0 for none).
func (r *Redactor) match(b []byte) (form, n int) {
	for k, f := range r.forms {
		var m int
		if f.Escaped {
			m = matchEscaped(b, f.Old)
		} else if bytes.HasPrefix(b, f.Old) {
			m = len(f.Old)
		}
		if m > n {
			form, n = k, m
		}
	}
	return form, n
}

// matchEscaped returns the most bytes at the start of b that read as old
// with any of its bytes escaped as Form.Escaped says, or 0.
func matchEscaped(b, old []byte) int {
	// The ends reachable after each byte of old; an escape and a literal
	// can both match ("%" and "%25"), so there may be more than one.
	var buf [8]int
	ends := append(buf[:0], 0)
	for _, c := range old {
		var next [8]int
		nn := next[:0]
		for _, at := range ends {
			for _, e := range escapedAt(b[at:], c) {
				if e > 0 && !slices.Contains(nn, at+e) && len(nn) < cap(nn) {
					nn = append(nn, at+e)
				}
			}
		}
		if len(nn) == 0 {
			return 0
		}
		ends = append(ends[:0], nn...)
	}
	return slices.Max(ends)
}

// escapedAt returns the lengths of the ways b begins with c: as itself,
// %hh, \u00hh, \/ for "/", or "+" for " " (0 for a way that does not).
func escapedAt(b []byte, c byte) [4]int {
	var w [4]int
	if len(b) == 0 {
		return w
	}
	switch {
	case b[0] == c:
		w[0] = 1
	case c == ' ' && b[0] == '+':
		w[0] = 1
	}
	if len(b) >= 3 && b[0] == '%' && HexByte(b[1], b[2]) == int(c) {
		w[1] = 3
	}
	if len(b) >= 2 && b[0] == '\\' {
		if c == '/' && b[1] == '/' {
			w[2] = 2
		}
		if len(b) >= 6 && b[1] == 'u' && HexByte(b[2], b[3]) == 0 && HexByte(b[4], b[5]) == int(c) {
			w[3] = 6
		}
	}
	return w
}

// hexByte returns the byte two hex digits spell, either case, or -1.
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
	r := NewFormRedactor(nil, forms)
	if len(r.forms) == 0 {
		return s, 0
	}
	r.pending = []byte(s)
	r.pass(true)
	return string(r.out), r.n
}

// RedactHeader replaces every occurrence of forms in the values of h, and
// deletes every header whose name holds one. It returns how many headers
// it changed.
func RedactHeader(h http.Header, forms []Form) int {
	n := 0
	for k, vs := range h {
		if _, m := RedactString(k, forms); m > 0 {
			delete(h, k)
			n++
			continue
		}
		changed := false
		for i, v := range vs {
			if out, m := RedactString(v, forms); m > 0 {
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

// Close closes the source.
func (r *Redactor) Close() error { return r.src.Close() }

// ReplaceValue replaces old with new in every value of h, and deletes
// every header whose name holds old. It returns how many headers it
// changed. An empty old changes nothing.
func ReplaceValue(h http.Header, old, new string) int {
	if old == "" {
		return 0
	}
	n := 0
	for k, vs := range h {
		if strings.Contains(k, old) {
			delete(h, k)
			n++
			continue
		}
		changed := false
		for i, v := range vs {
			if strings.Contains(v, old) {
				vs[i] = strings.ReplaceAll(v, old, new)
				changed = true
			}
		}
		if changed {
			n++
		}
	}
	return n
}
