package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// Watch returns body read through a watch for needle: the first time
// needle passes whole (across reads too), seen is called, once, on the
// reading goroutine. The bytes pass unchanged and nothing is held back.
// An empty needle watches nothing, and body is returned as it is.
//
// Egress and Fountain watch an answer for the box's own token before
// they redact it: a host that hands the token back holds it (a pushed
// .env), which the broker records (capability.ReasonTokenSeen).
func Watch(body io.ReadCloser, needle string, seen func()) io.ReadCloser {
	if needle == "" || body == nil || body == http.NoBody {
		return body
	}
	return &watch{ReadCloser: body, needle: []byte(needle), seen: seen}
}

// AnswerWatch watches one answer for a needle: its headers when made
// (WatchAnswer), its body as read (Body). Seen is called once an answer,
// however often the needle passes.
type AnswerWatch struct {
	needle string
	seen   func()
	told   bool
}

// WatchAnswer begins watching an answer whose header is h for needle,
// judging h at once; seen is called the first time needle is found. An
// empty needle watches nothing.
//
// Egress and Fountain watch an answer for the box's own token before
// they redact it; seen logs and audits (capability.TokenSeen).
func WatchAnswer(h http.Header, needle string, seen func()) *AnswerWatch {
	w := &AnswerWatch{needle: needle, seen: seen}
	if HeaderHolds(h, needle) {
		w.tell()
	}
	return w
}

// Body returns the answer's body read through the watch (Watch); once
// the needle has been seen, body is returned as it is.
func (w *AnswerWatch) Body(body io.ReadCloser) io.ReadCloser {
	if w.told {
		return body
	}
	return Watch(body, w.needle, w.tell)
}

func (w *AnswerWatch) tell() {
	if w.told {
		return
	}
	w.told = true
	w.seen()
}

// HeaderHolds reports whether any value of h holds needle.
func HeaderHolds(h http.Header, needle string) bool {
	if needle == "" {
		return false
	}
	for _, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, needle) {
				return true
			}
		}
	}
	return false
}

// watch is Watch's reader.
type watch struct {
	io.ReadCloser
	needle []byte
	seen   func()
	done   bool
	// tail is the last len(needle)-1 bytes read, and buf where they are
	// joined with the next read's first, so that a needle split across
	// two reads is found.
	tail, buf []byte
}

func (w *watch) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if n > 0 && !w.done {
		w.scan(p[:n])
	}
	return n, err
}

func (w *watch) scan(b []byte) {
	keep := len(w.needle) - 1
	if len(w.tail) > 0 {
		w.buf = append(append(w.buf[:0], w.tail...), b[:min(len(b), keep)]...)
		if bytes.Contains(w.buf, w.needle) {
			w.hit()
			return
		}
	}
	if bytes.Contains(b, w.needle) {
		w.hit()
		return
	}
	if len(b) >= keep {
		w.tail = append(w.tail[:0], b[len(b)-keep:]...)
		return
	}
	w.tail = append(w.tail, b...)
	if len(w.tail) > keep {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-keep:]...)
	}
}

func (w *watch) hit() {
	w.done, w.tail, w.buf = true, nil, nil
	w.seen()
}
