package h1server

import (
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/httptoken"
)

// outSize is the write buffer: an answer that ends within it goes out in
// one write with its head and a Content-Length.
const outSize = 4 << 10

var (
	outBuffers  = sync.Pool{New: func() any { b := make([]byte, 0, outSize); return &b }}
	headBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}
)

// response is the http.ResponseWriter of one request.
type response struct {
	c      *conn
	req    *http.Request
	header http.Header

	status      int // 0 until WriteHeader
	isHead      bool
	bodyAllowed bool
	// head holds the status line and the handler's header fields, as they
	// were at WriteHeader; commit adds the fields it decides.
	head      *[]byte
	haveType  bool
	haveDate  bool
	hasCE     bool
	trailers  []string // declared in the Trailer header
	anyTrails bool     // a Trailer header, or a key with http.TrailerPrefix
	cl        int64    // the handler's Content-Length, or -1

	committed  bool // the head's last fields are decided and it is in out or sent
	chunked    bool
	wrote      int64   // body bytes the handler wrote
	out        *[]byte // bytes waiting to be written: nil when none
	closeAfter bool
	done       bool // the handler has returned
	err        error
}

func newResponse(c *conn, req *http.Request) *response {
	return &response{c: c, req: req, header: make(http.Header), cl: -1, isHead: req.Method == http.MethodHead}
}

func (w *response) Header() http.Header { return w.header }

// WriteHeader renders the head as the header stands now; informational
// codes are written at once and the final answer is still to come.
func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if w.status != 0 {
		w.c.srv.logf("http: superfluous response.WriteHeader call with %d (the answer is already %d)", code, w.status)
		return
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.status = code
	w.bodyAllowed = !(code == http.StatusNoContent || code == http.StatusNotModified)
	h := headBuffers.Get().(*[]byte)
	b := appendStatusLine((*h)[:0], code)
	for k, vs := range w.header {
		switch {
		case !httptoken.Valid(k):
			continue
		case k == "Content-Length":
			if len(vs) > 0 {
				if v, err := strconv.ParseInt(vs[0], 10, 64); err == nil && v >= 0 {
					w.cl = v
				} else {
					w.c.srv.logf("http: invalid Content-Length of %q", vs[0])
				}
			}
			continue // written at commit
		case k == "Transfer-Encoding":
			continue // chunking is decided at commit
		case k == "Connection":
			for _, v := range vs {
				if httptoken.Listed(v, "close") {
					w.closeAfter = true
				}
			}
			continue // written at commit when closing
		case strings.HasPrefix(k, http.TrailerPrefix):
			w.anyTrails = true
			continue
		case k == "Content-Type":
			w.haveType = true
		case k == "Date":
			w.haveDate = true
		case k == "Content-Encoding":
			w.hasCE = len(vs) > 0 && vs[0] != ""
		case k == "Trailer":
			w.anyTrails = true
			for _, v := range vs {
				for _, t := range strings.Split(v, ",") {
					if t = textproto.TrimString(t); t != "" {
						w.trailers = append(w.trailers, http.CanonicalHeaderKey(t))
					}
				}
			}
		}
		if k == "Content-Type" && code == http.StatusNotModified {
			continue
		}
		for _, v := range vs {
			b = appendField(b, k, v)
		}
	}
	*h = b
	w.head = h
}

// writeInformational writes a 1xx answer and its header fields now.
func (w *response) writeInformational(code int) {
	if w.err != nil {
		return
	}
	h := headBuffers.Get().(*[]byte)
	b := appendStatusLine((*h)[:0], code)
	for k, vs := range w.header {
		if httptoken.Valid(k) {
			for _, v := range vs {
				b = appendField(b, k, v)
			}
		}
	}
	b = append(b, "\r\n"...)
	_, w.err = w.c.rwc.Write(b)
	*h = b[:0]
	headBuffers.Put(h)
}

func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !w.bodyAllowed {
		return 0, http.ErrBodyNotAllowed
	}
	w.wrote += int64(len(p))
	if w.cl >= 0 && w.wrote > w.cl {
		return 0, http.ErrContentLength
	}
	if w.isHead {
		return len(p), nil // counted, for a finished answer's length, not sent
	}
	if w.out == nil {
		w.out = outBuffers.Get().(*[]byte)
	}
	if !w.committed {
		if len(*w.out)+len(p) <= cap(*w.out) {
			*w.out = append(*w.out, p...)
			return len(p), nil
		}
		w.commit()
	}
	w.appendBody(p)
	return len(p), w.err
}

// appendBody adds p (chunk-framed when chunking) after the committed head,
// writing out what waits when it would not fit.
func (w *response) appendBody(p []byte) {
	out := *w.out
	frame := 0
	if w.chunked {
		frame = 20
	}
	if len(out)+len(p)+frame > cap(out) {
		w.writeOut()
		if w.err != nil {
			return
		}
		out = *w.out
		if len(p)+frame > cap(out) {
			// Too large to copy: the frame's head, then p itself.
			if w.chunked {
				out = strconv.AppendInt(out, int64(len(p)), 16)
				out = append(out, "\r\n"...)
				_, w.err = w.c.rwc.Write(out)
				*w.out = out[:0]
				if w.err == nil {
					_, w.err = w.c.rwc.Write(p)
				}
				if w.err == nil {
					*w.out = append((*w.out)[:0], "\r\n"...)
				}
				return
			}
			_, w.err = w.c.rwc.Write(p)
			return
		}
	}
	if w.chunked {
		out = strconv.AppendInt(out, int64(len(p)), 16)
		out = append(out, "\r\n"...)
		out = append(out, p...)
		out = append(out, "\r\n"...)
	} else {
		out = append(out, p...)
	}
	*w.out = out
}

// commit decides the head's last fields (length or chunking, type, date,
// connection) and puts the head before the body bytes waiting in out.
func (w *response) commit() {
	if w.committed {
		return
	}
	w.committed = true
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	var body []byte
	if w.out != nil {
		body = *w.out
	}
	w.drainBody()
	b := *w.head
	switch {
	case !w.bodyAllowed || w.status < 200:
	case w.cl >= 0:
		b = appendField(b, "Content-Length", strconv.FormatInt(w.cl, 10))
	case w.done && !w.anyTrails && (!w.isHead || w.wrote > 0):
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, w.wrote, 10)
		b = append(b, "\r\n"...)
	case w.isHead:
	default:
		w.chunked = true
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.bodyAllowed && !w.haveType && !w.hasCE && len(body) > 0 {
		b = appendField(b, "Content-Type", http.DetectContentType(body))
	}
	if !w.haveDate {
		b = append(b, "Date: "...)
		b = appendDate(b)
		b = append(b, "\r\n"...)
	}
	if w.closeAfter || w.req.Close || w.c.srv.shutting.Load() {
		w.closeAfter = true
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	*w.head = b
	// The head goes in front of the waiting body bytes, framed as a chunk
	// when chunking.
	if w.out == nil {
		w.out = outBuffers.Get().(*[]byte)
	}
	frame := 0
	if w.chunked && len(body) > 0 {
		frame = 20
	}
	if len(b)+len(body)+frame <= cap(*w.out) {
		out := (*w.out)[:cap(*w.out)]
		var pre []byte
		if frame > 0 {
			pre = strconv.AppendInt(pre, int64(len(body)), 16)
			pre = append(pre, "\r\n"...)
		}
		shift := len(b) + len(pre)
		copy(out[shift:], body)
		copy(out, b)
		copy(out[len(b):], pre)
		n := shift + len(body)
		if frame > 0 {
			n += copy(out[n:], "\r\n")
		}
		*w.out = out[:n]
	} else {
		// A long head: written now, then the body as usual.
		_, w.err = w.c.rwc.Write(b)
		rest := append([]byte(nil), body...)
		*w.out = (*w.out)[:0]
		if w.err == nil && len(rest) > 0 {
			w.appendBody(rest)
		}
	}
	*w.head = b[:0]
	headBuffers.Put(w.head)
	w.head = nil
}

// drainBody reads what the handler left of the request's body before the
// answer's head goes out, as net/http does (a box that sends its whole
// request before it reads can otherwise deadlock); more than maxDrain
// closes the connection instead.
func (w *response) drainBody() {
	b, ok := w.req.Body.(*body)
	if !ok {
		return
	}
	b.mu.Lock()
	left, failed := b.n, b.err != nil && b.err != io.EOF
	b.mu.Unlock()
	switch {
	case failed || left >= maxDrain:
		w.closeAfter = true
	case left > 0:
		if !b.close(true) {
			w.closeAfter = true
		}
	}
}

// writeOut writes what waits in out.
func (w *response) writeOut() {
	if w.out == nil || len(*w.out) == 0 || w.err != nil {
		return
	}
	_, w.err = w.c.rwc.Write(*w.out)
	*w.out = (*w.out)[:0]
}

// Flush writes the head and what the handler wrote; an answer of unknown
// length is chunked from here on. Between flushes the answer holds no
// buffer.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush, with the write's error.
func (w *response) FlushError() error {
	if w.err != nil {
		return w.err
	}
	w.commit()
	w.writeOut()
	w.putOut()
	return w.err
}

func (w *response) putOut() {
	if w.out != nil {
		*w.out = (*w.out)[:0]
		outBuffers.Put(w.out)
		w.out = nil
	}
}

// SetReadDeadline and SetWriteDeadline are http.ResponseController's.
func (w *response) SetReadDeadline(t time.Time) error  { return w.c.rwc.SetReadDeadline(t) }
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.rwc.SetWriteDeadline(t) }

// EndAnswer ends the answer before the handler returns: nothing more will
// be written (a later Write fails), so it goes out now, with its length if
// it is still whole in the buffer, and the handler may go on with work the
// box need not wait for (its log line, say). A handler finds it through
// the Unwrap chain of the http.ResponseWriter it was given.
func (w *response) EndAnswer() error {
	w.finish()
	if w.err == errEnded {
		return nil
	}
	return w.err
}

// errEnded is a write after EndAnswer.
var errEnded = errors.New("h1server: write after the answer was ended")

// finish ends the answer once the handler has returned (or called
// EndAnswer): the head if not yet sent, what waits, and the last chunk
// with the trailers.
func (w *response) finish() {
	if w.done {
		return
	}
	defer func() {
		if w.err == nil {
			w.err = errEnded
		}
		w.putOut()
	}()
	w.done = true
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.commit()
	if w.err != nil {
		return
	}
	if w.chunked {
		if w.out == nil {
			w.out = outBuffers.Get().(*[]byte)
		}
		b := append(*w.out, "0\r\n"...)
		for _, k := range w.trailers {
			for _, v := range w.header[k] {
				b = appendField(b, k, v)
			}
		}
		for k, vs := range w.header {
			if t, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && httptoken.Valid(t) {
				for _, v := range vs {
					b = appendField(b, t, v)
				}
			}
		}
		*w.out = append(b, "\r\n"...)
	} else if w.cl >= 0 && w.wrote < w.cl && w.bodyAllowed && !w.isHead {
		// Shorter than it said: the box must not read the next answer as
		// the rest of this one.
		w.closeAfter = true
	}
	w.writeOut()
}

// release returns the answer's buffers.
func (w *response) release() {
	w.putOut()
	if w.head != nil {
		*w.head = (*w.head)[:0]
		headBuffers.Put(w.head)
		w.head = nil
	}
}

func appendStatusLine(b []byte, code int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	b = append(b, text...)
	return append(b, "\r\n"...)
}

// appendField writes "k: v\r\n", a CR or LF in v turned to a space, as
// net/http does, so no value can start a field of its own.
func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	start := len(b)
	b = append(b, textproto.TrimString(v)...)
	for i := start; i < len(b); i++ {
		if b[i] == '\r' || b[i] == '\n' {
			b[i] = ' '
		}
	}
	return append(b, "\r\n"...)
}

// The Date field, formatted once a second.
type dateText struct {
	sec  int64
	text []byte
}

var date atomic.Pointer[dateText]

func appendDate(b []byte) []byte {
	now := time.Now()
	d := date.Load()
	if d == nil || d.sec != now.Unix() {
		d = &dateText{sec: now.Unix(), text: now.UTC().AppendFormat(nil, http.TimeFormat)}
		date.Store(d)
	}
	return append(b, d.text...)
}
