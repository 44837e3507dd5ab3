package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
)

// redactFirst is how much a Redactor first reads from its source at a
// time; once a read fills that, it reads up to redactChunk at a time. A
// small answer (most of them) never needs the larger buffer.
const (
	redactFirst = 2 << 10
	redactChunk = 32 << 10
)

// Redactor is an io.ReadCloser that copies a source with every occurrence
// of one byte string replaced by another, as bytes.ReplaceAll would over
// the whole stream, while holding only a bounded amount of it in memory.
//
// An occurrence split across the source's reads is still caught: after
// each read the Redactor holds back the longest tail of what it has read
// that could be the start of an occurrence (never more than len(old)-1
// bytes, and nothing at all when the tail cannot begin one), so a stream
// that never repeats the old string is passed on as it comes, with no
// added delay. Memory is bounded by that tail, one read of 32 KiB, and the
// same read with its occurrences replaced.
//
// When the source ends with io.EOF the held tail is passed on, since it
// can no longer become an occurrence. When it fails with any other error
// the held tail is dropped, not passed on, and the error is returned.
//
// A Redactor is not safe for concurrent use.
type Redactor struct {
	src      io.ReadCloser
	old, new []byte
	fail     []int // KMP failure function of old

	pending []byte // read from src, not yet passed on; cap len(old)-1+redactFirst, then +redactChunk
	out     []byte // passed on, not yet returned by Read
	off     int    // out[:off] has been returned
	err     error  // src's error, returned once out is drained
	n       int    // occurrences replaced
}

// NewRedactor returns a Redactor reading src and replacing every old with
// new. An empty old replaces nothing. Closing the Redactor closes src.
func NewRedactor(src io.ReadCloser, old, new []byte) *Redactor {
	r := &Redactor{src: src, old: bytes.Clone(old), new: bytes.Clone(new)}
	if len(old) > 0 {
		r.fail = failure(r.old)
		r.pending = make([]byte, 0, len(old)-1+redactFirst)
	}
	return r
}

// Replaced reports how many occurrences the Redactor has replaced so far.
func (r *Redactor) Replaced() int { return r.n }

// Read reads the source with every occurrence of old replaced.
func (r *Redactor) Read(p []byte) (int, error) {
	if len(r.old) == 0 {
		return r.src.Read(p)
	}
	for r.off == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.off = r.out[:0], 0
		n, err := r.src.Read(r.pending[len(r.pending):cap(r.pending)])
		r.pending = r.pending[:len(r.pending)+n]
		if full := len(r.old) - 1 + redactChunk; len(r.pending) == cap(r.pending) && cap(r.pending) < full {
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
			// Broken stream: pass on what cannot be part of an
			// occurrence, and drop the tail that might be.
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
// the tail that could begin an occurrence unless final.
func (r *Redactor) pass(final bool) {
	data := r.pending
	i := 0
	for {
		j := bytes.Index(data[i:], r.old)
		if j < 0 {
			break
		}
		r.out = append(r.out, data[i:i+j]...)
		r.out = append(r.out, r.new...)
		i += j + len(r.old)
		r.n++
	}
	hold := 0
	if !final {
		hold = r.partial(data[i:])
	}
	r.out = append(r.out, data[i:len(data)-hold]...)
	r.pending = r.pending[:copy(r.pending, data[len(data)-hold:])]
}

// partial returns the length of the longest suffix of b that is a proper
// prefix of old: the bytes that might still become an occurrence.
func (r *Redactor) partial(b []byte) int {
	if len(b) >= len(r.old) {
		b = b[len(b)-(len(r.old)-1):]
	}
	k := 0 // length of the longest suffix so far that is a prefix of old
	for _, c := range b {
		for k > 0 && r.old[k] != c {
			k = r.fail[k-1]
		}
		if r.old[k] == c {
			k++
		}
		// No full occurrence can end here: b is shorter than old.
	}
	return k
}

// failure is the Knuth–Morris–Pratt failure function of p: f[i] is the
// length of the longest proper prefix of p[:i+1] that is also its suffix.
func failure(p []byte) []int {
	f := make([]int, len(p))
	k := 0
	for i := 1; i < len(p); i++ {
		for k > 0 && p[k] != p[i] {
			k = f[k-1]
		}
		if p[k] == p[i] {
			k++
		}
		f[i] = k
	}
	return f
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
