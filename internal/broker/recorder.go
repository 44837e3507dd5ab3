package broker

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/proxy"
)

// recorder notes the status and size of an answer and passes flushes on.
// When srv is set, the box is judged again (srv.rejudge) before each part
// of the answer is written, and none of it is written once the box is
// refused; and srv.streamOpened(info) is called once when the answer
// begins as text/event-stream (fields, not a closure: no allocation).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	srv    *Server
	info   *requestInfo
	ctx    context.Context // the request's
	// length is the answer's Content-Length, -1 when it has none; the
	// last byte of an answer of known length is held back (last,
	// holding) until ServeHTTP has concluded the request.
	length  int64
	last    byte
	holding bool
}

func (r *recorder) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		r.ResponseWriter.WriteHeader(code) // informational: the answer is still to come
		return
	}
	if !r.wrote {
		if r.judge() != nil {
			return // cut: ServeHTTP answers with the box's refusal
		}
		r.status = code
		r.begin()
	}
	r.ResponseWriter.WriteHeader(code)
}

// HeaderWritten is whether the answer's header has been written: false
// while it is to come, and when it was not written because the box was
// refused (judge), so that a forwarder does not take an answer the box
// never began to get for one it did.
func (r *recorder) HeaderWritten() bool { return r.wrote }

var _ proxy.HeaderWriter = (*recorder)(nil)

// judge is the error that cut the request once its box is judged
// refused (rejudge), or nil; always nil when srv is unset.
func (r *recorder) judge() error {
	if r.srv == nil {
		return nil
	}
	return r.srv.rejudge(r.ctx, r.info)
}

// begin notes that the answer has begun, and whether it is a stream.
func (r *recorder) begin() {
	r.wrote = true
	r.length = -1
	if cl := r.Header().Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
			r.length = n
		}
	}
	stream := r.status < 300 && strings.HasPrefix(r.Header().Get("Content-Type"), "text/event-stream")
	if stream && r.srv != nil {
		r.srv.streamOpened(r.info)
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if err := r.judge(); err != nil {
		return 0, err
	}
	if !r.wrote {
		r.begin()
	}
	if r.length > 0 && !r.holding && len(b) > 0 && r.bytes+int64(len(b)) == r.length {
		// The answer's last byte: held back until its records are kept.
		n, err := r.ResponseWriter.Write(b[:len(b)-1])
		r.bytes += int64(n)
		if err != nil {
			return n, err
		}
		r.last, r.holding = b[len(b)-1], true
		r.bytes++
		return len(b), nil
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// unwrap is the writer net/http gave the handler beneath w's recorder:
// http.MaxBytesReader tells it when a body is over its bound, so that
// the server closes the connection rather than read on.
func unwrap(w http.ResponseWriter) http.ResponseWriter {
	if rec, ok := w.(*recorder); ok {
		return rec.ResponseWriter
	}
	return w
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush passes a flush on, for streamed answers; before the answer has
// begun, not once its box is refused (a flush would send a header).
func (r *recorder) Flush() {
	if !r.wrote && r.judge() != nil {
		return
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
