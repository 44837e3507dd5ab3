package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
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
	// Escaped, when true, also finds Old with any of its characters
	// written as a percent-escape (%2F or %2f, with any reserved set: a
	// byte escaped that need not be is found too; a character past
	// ASCII as its UTF-8's, %C3%A9), as a JSON escape (\u002F, either
	// case, \" and \\ as every JSON encoder writes them, \/ for "/", and
	// a character past ASCII as \u00e9 or a surrogate pair, as encoders
	// that write only ASCII do), as an HTML or XML character reference of
	// up to six bytes for each byte of its UTF-8 (&amp; &lt; &gt; &quot;
	// &apos;, and &#38; &#038; &#x26; &#233; &#xE9; for any character, as
	// html.EscapeString, html/template, ASP.NET's HtmlEncoder and the
	// escapers of other languages write them), or, for a space, as "+";
	// and written so twice, as one layer escapes what another wrote: a
	// percent-, \u or reference escape with its first byte escaped again (\\u0026 and
	// \\\" in JSON in a JSON string, \u0026amp; in HTML in JSON,
	// &amp;quot; in HTML escaped twice, %2526 in a URL in a URL), and \"
	// \\ \/ with either byte escaped (\&quot; in JSON in an HTML
	// attribute). Each byte of Old then spans up to escapedSpan (12)
	// bytes of the source, so Old may span 12*len(Old).
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
	// Fill, when not zero, replaces each occurrence by as many Fill
	// bytes as the occurrence spans in the source, in place of New: an
	// Escaped form's occurrence is then replaced without changing the
	// source's length, so a Content-Length still holds.
	Fill byte
}

// Masked are the Escaped forms of values, each masked with as many
// asterisks as it spans (Fill), so that what held one keeps its length:
// a credential's, wherever an answer or a model's text repeats it.
func Masked[T string | []byte](values ...T) []Form {
	forms := make([]Form, 0, len(values))
	for _, v := range values {
		forms = append(forms, Form{Old: []byte(v), Escaped: true, Fill: '*'})
	}
	return forms
}

// escapedSpan is the most bytes of the source a byte of an Escaped
// form spans: a byte escaped twice, its escape's first byte and its last
// byte each escaped in six (\u005c\u0022).
const escapedSpan = 12

// span is the most bytes an occurrence of f can span in the source.
func (f Form) span() int {
	per := 1
	if f.Escaped {
		per = escapedSpan
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

// Redactor returns a Redactor reading src and replacing every form of s;
// with none, it passes src on unchanged.
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
// bufs: the first read's buffer, when the window is at most 2 KiB (an
// Escaped form of up to 170 bytes, such as an Anthropic API key).
// A Redactor takes one as it starts and gives it back when its source has ended and all it
// passed on is read, on the goroutine that reads it; one never read to
// its end (closed early, or failed) leaves them to the collector.
const pooledCap = redactFirst + 2<<10

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
// list whose forms all begin with the depth bytes read so far, which
// end at pos.
type state struct{ lo, hi, pos, depth int32 }

// refStarts reports whether b, which begins with "&", begins a
// character reference, once or twice escaped, of the first byte of an
// Escaped form.
func (s *FormSet) refStarts(b []byte) bool {
	var buf [8]way
	for _, w := range escapedWays(buf[:0], b) {
		if s.refFirst[w.b[0]] {
			return true
		}
	}
	return false
}

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
				if s.pairs != nil && s.pairs[p/64]&(1<<(p%64)) != 0 {
					return j
				}
				if data[j] == '&' && (data[j+1] == '#' || s.refNamed || data[j+1]|0x20 == 'a') && s.refStarts(data[j:]) {
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
