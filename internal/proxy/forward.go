package proxy

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httputil"
	"sync"

	"github.com/intentius/boxbroker/internal/capability"
)

// Forwarder forwards a box's request upstream and streams the answer
// back: it is httputil.ReverseProxy with Rewrite, and two guards of its
// own around it.
//
// As with every ReverseProxy using Rewrite, the hop-by-hop headers (and
// any the box's Connection header names) are removed before Rewrite
// runs, so a box sending "Connection: X-Api-Key" cannot strip a
// credential Rewrite sets, and Forwarded and X-Forwarded-* are removed
// too. An event stream, or an answer of unknown length, is flushed to the
// box after every read.
//
// The guards:
//
//   - No request trailer is carried: a box's trailer fields come after
//     its body, where no scan of the head reads them, so the Forwarder
//     drops them after Rewrite (the broker drops them too, before any
//     capability runs).
//   - No protocol upgrade is carried. ReverseProxy would pass a box's
//     Upgrade header on and then splice the two connections together,
//     where nothing could keep a credential out of the bytes; the
//     Forwarder removes Upgrade and Connection after Rewrite, so an
//     upstream that switches protocols anyway is answered with a 502.
//   - A GET or HEAD that carries a body goes upstream on a connection
//     of its own, closed after its answer: an upstream that does not read
//     such a body would take it for the start of the next request.
//   - Informational (1xx) answers reach the box only through
//     Informational, which may remove what must not reach it; with no
//     Informational they are dropped. ReverseProxy alone would copy their
//     headers to the box as they came, and clear every header the
//     capability had set on the answer before forwarding.
type Forwarder struct {
	httputil.ReverseProxy
	// Informational, when set, is given the box's request and each 1xx
	// answer's header before the answer is passed on to the box; it may
	// change or delete any of them. Nil drops 1xx answers.
	Informational func(r *http.Request, h http.Header)
}

// New returns a Forwarder with boxbroker's defaults: the given rewrite,
// transport and error handler, and pooled copy buffers of
// CopyBufferSize.
func New(rewrite func(*httputil.ProxyRequest), transport http.RoundTripper, errorHandler func(http.ResponseWriter, *http.Request, error)) *Forwarder {
	f := &Forwarder{}
	f.Rewrite = func(pr *httputil.ProxyRequest) {
		rewrite(pr)
		pr.Out.Header.Del("Upgrade")
		pr.Out.Header.Del("Connection")
		// Request trailers never go upstream: they come after the body,
		// where no scan of the head reads them.
		pr.Out.Trailer = nil
		if m := pr.Out.Method; (m == http.MethodGet || m == http.MethodHead) && pr.Out.Body != nil {
			// An upstream may not read such a body, and leave it in
			// front of the next request on the connection: use this
			// connection for this request alone.
			pr.Out.Close = true
		}
	}
	f.Transport = lengthNoted{next: transport}
	f.ErrorHandler = errorHandler
	f.BufferPool = &bufferPool{}
	return f
}

// ErrAnswerCut is the error a Forwarder's ErrorHandler is given when the
// upstream's answer broke off (its connection closed or reset before the
// length it declared) before any byte of it was sent to the box: the box
// is then answered with the ErrorHandler's refusal, not a header and a
// cut body.
var ErrAnswerCut = fmt.Errorf("the upstream's answer broke off before any of it was sent: %w", io.ErrUnexpectedEOF)

// ServeHTTP forwards req and copies the answer to rw. The answer's
// status line and header go to rw with its first byte, or its first
// flush (an event stream's, at once), so that an answer that breaks off
// before either is answered with the ErrorHandler's refusal for
// ErrAnswerCut; one that breaks off later ends the box's connection
// (http.ErrAbortHandler), as ReverseProxy does. An answer the broker
// cuts (a Write to rw fails with capability.ErrCut) before rw wrote its
// header (HeaderWriter) has the ErrorHandler given the cut, and the box
// gets the broker's refusal rather than a closed connection.
func (f *Forwarder) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	w := &answerWriter{rw: rw, req: req, informational: f.Informational, pending: make(http.Header)}
	req = req.WithContext(context.WithValue(req.Context(), answerKey{}, w))
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		// The broker's cut (rw's Write failed with capability.ErrCut)
		// before rw wrote the header: nothing reached the box, which
		// the broker answers with its refusal.
		_, cut := capability.Cut(w.err)
		cut = cut && w.sent && !headerWritten(w.rw)
		if v != http.ErrAbortHandler || w.code == 0 || w.sent && !cut {
			panic(v)
		}
		// ReverseProxy's copy of the body failed before a byte reached
		// the box: a read of the upstream's answer, or the cut, which the
		// ErrorHandler is given as it is.
		w.pending = nil
		err := ErrAnswerCut
		if cut {
			err = w.err
		}
		if f.ErrorHandler == nil {
			rw.WriteHeader(http.StatusBadGateway)
			return
		}
		f.ErrorHandler(rw, req, err)
	}()
	f.ReverseProxy.ServeHTTP(w, req)
	if w.code != 0 {
		w.send() // an answer with no body
	}
}

// answerWriter is the ResponseWriter the ReverseProxy writes to. Until
// the final answer's header goes out, Header is a map of its own, so
// that a 1xx answer's header never mixes with what the capability set on
// the box's answer beforehand, and so that an answer that breaks off
// before its first byte leaves nothing of itself on the box's. The
// final header goes out (added to the box's) with the first Write or
// flush, or when the ReverseProxy returns.
type answerWriter struct {
	rw            http.ResponseWriter
	req           *http.Request
	informational func(*http.Request, http.Header)
	pending       http.Header // nil once the final header is sent
	code          int         // the final status, once written; 0 before
	sent          bool        // whether the final header went to rw
	err           error       // the first error a Write to rw returned
	// sized is whether the upstream declared the answer's length and it
	// is no event stream: a flush before its first byte (ReverseProxy
	// flushes at once an answer a capability made of unknown length)
	// then sends nothing, so that an answer cut before its first byte is
	// still a refusal.
	sized bool
}

// answerKey is the request context's key for the answerWriter of the
// request being forwarded, which lengthNoted tells of the upstream's
// answer.
type answerKey struct{}

// lengthNoted is a Forwarder's transport: next, noting on the request's
// answerWriter whether the upstream declared its answer's length.
type lengthNoted struct{ next http.RoundTripper }

func (t lengthNoted) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(r)
	if err == nil {
		if w, ok := r.Context().Value(answerKey{}).(*answerWriter); ok {
			w.sized = res.ContentLength > 0 && !IsEventStream(res.Header)
		}
	}
	return res, err
}

func (w *answerWriter) Header() http.Header {
	if w.pending != nil {
		return w.pending
	}
	return w.rw.Header()
}

func (w *answerWriter) WriteHeader(code int) {
	if w.code != 0 {
		if w.sent {
			w.rw.WriteHeader(code) // superfluous; let the server say so
		}
		return
	}
	if code >= 100 && code < 200 {
		w.inform(code)
		return
	}
	w.code = code
}

// send sends the final header to the box, once.
func (w *answerWriter) send() {
	if w.sent {
		return
	}
	if w.code == 0 {
		w.code = http.StatusOK
	}
	dst := w.rw.Header()
	for k, vs := range w.pending {
		dst[k] = append(dst[k], vs...)
	}
	w.pending = nil
	w.sent = true
	w.rw.WriteHeader(w.code)
}

// HeaderWriter is a ResponseWriter that may decline to write an
// answer's header (the broker's, once the box is refused as the answer
// begins); HeaderWritten tells whether it has written it.
type HeaderWriter interface {
	http.ResponseWriter
	HeaderWritten() bool
}

// headerWritten is whether a header written to rw reached the box:
// what the first HeaderWriter rw is or wraps (Unwrap) tells, true when
// there is none.
func headerWritten(rw http.ResponseWriter) bool {
	for {
		switch w := rw.(type) {
		case HeaderWriter:
			return w.HeaderWritten()
		case interface{ Unwrap() http.ResponseWriter }:
			rw = w.Unwrap()
		default:
			return true
		}
	}
}

// inform passes a 1xx answer on through Informational, with none of the
// headers already set on the box's answer.
func (w *answerWriter) inform(code int) {
	h := w.pending
	defer clear(h)
	if w.informational == nil {
		return
	}
	w.informational(w.req, h)
	dst := w.rw.Header()
	saved := dst.Clone()
	clear(dst)
	maps.Copy(dst, h)
	w.rw.WriteHeader(code)
	clear(dst)
	maps.Copy(dst, saved)
}

func (w *answerWriter) Write(p []byte) (int, error) {
	w.send()
	n, err := w.rw.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// FlushError flushes the box's answer, as http.ResponseController does;
// before the first byte of an answer whose length the upstream declared,
// it does nothing.
func (w *answerWriter) FlushError() error {
	if !w.sent && w.sized {
		return nil
	}
	w.send()
	return http.NewResponseController(w.rw).Flush()
}

// Unwrap returns the box's ResponseWriter, for http.ResponseController.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.rw }

// CopyBufferSize is the size of the buffers answers are copied through.
// A stream holds one for as long as it is open, so it is small; larger
// answers take more reads through it, each flushed only when the answer
// is streamed.
const CopyBufferSize = 4 << 10

// bufferPool is a httputil.BufferPool of CopyBufferSize buffers.
type bufferPool struct{ p sync.Pool }

// Get returns a buffer of CopyBufferSize bytes.
func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[CopyBufferSize]byte); ok {
		return v[:]
	}
	return make([]byte, CopyBufferSize)
}

// Put returns a buffer Get lent.
func (b *bufferPool) Put(buf []byte) {
	if cap(buf) >= CopyBufferSize {
		b.p.Put((*[CopyBufferSize]byte)(buf[:CopyBufferSize]))
	}
}
