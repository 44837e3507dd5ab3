package broker

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// ServeHTTP serves the box-facing routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.serveHTTP(w, r, nil)
}

// serveHTTP serves r, handed in with hd (nil: from the broker's own
// listener).
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, hd *Handoff) {
	start := s.cfg.Now()
	// What one request keeps, in one allocation.
	st := &requestState{rec: recorder{ResponseWriter: w, status: http.StatusOK, srv: s}}
	info, rec, trace := &st.info, &st.rec, &st.trace
	rec.info = info
	info.Method = recordedMethod(r.Method)
	// The call's context carries its outbox Call, which holds the call's
	// settlement until it concludes: its audit entry and settlement are
	// journaled together.
	st.ctx.Context = proxy.WithTrace(r.Context(), trace)
	info.Call = &st.ctx.Call
	r = r.WithContext(&st.ctx)
	rec.ctx = r.Context()
	// A request's trailer fields are dropped on every route: they come
	// after the body, where no scan of the head reads them, and no
	// capability takes any. (net/http fills in the map the request it
	// holds names, which this copy no longer does.)
	r.Trailer = nil
	defer s.finish(rec, r, info, trace, start)
	err := s.serve(rec, r, info, hd)
	if ce := info.judged.refused(); ce != nil && !rec.wrote {
		// The box was refused as its request was served (rejudge),
		// before any of the answer reached it: it is answered with that
		// refusal, and with nothing the capability made of the cut
		// request (its header included). The rest of its body is left
		// unread.
		rec.srv = nil // the refusal itself is not judged
		clear(rec.Header())
		leaveBody(rec, r)
		err = ce
	}
	if err != nil {
		s.writeError(rec, r, err, info)
	}
	// The answer is complete. Its metrics and audit record are queued
	// (and journaled), then an answer of known length goes out in full —
	// its last byte, held back until now, with it: the box does not
	// wait for the request's log line, and does not have its whole
	// answer before the call's records are kept.
	s.conclude(rec, r, info, trace, start, false)
	if rec.holding {
		rec.holding = false
		_, _ = w.Write([]byte{rec.last})
	}
	if rec.wrote && rec.Header().Get("Content-Length") != "" {
		_ = http.NewResponseController(w).Flush()
	}
}

// streamOpened notes that the answer of the request info tells of began
// as a stream, and counts it.
func (s *Server) streamOpened(info *requestInfo) {
	info.stream = true
	s.cfg.Metrics.StreamOpened(info.capabilityLabel())
}

// requestState is what ServeHTTP keeps of one request.
type requestState struct {
	info  requestInfo
	rec   recorder
	trace proxy.Trace
	ctx   outbox.CallContext
}

func (s *Server) serve(w *recorder, r *http.Request, info *requestInfo, hd *Handoff) error {
	if hd != nil && hd.Tunnel != nil {
		return s.serveTunnel(w, r, info, hd)
	}
	if r.URL.Path == protocol.RouteDeclaration {
		info.Route = protocol.RouteDeclaration
		err := s.declaration(w, r, info)
		s.cfg.Metrics.DeclarationReport(err == nil)
		return err
	}
	c, call, h, err := s.admit(w, r, info, hd)
	if err != nil {
		if info.Box == "" {
			// Refused before any box was known: not a byte of the body
			// has been read, and none will be.
			leaveBody(w, r)
		}
		return err
	}
	defer h.release()
	return c.Serve(w, r, call)
}

// leaveBody makes the refusal of r, whose body the broker has not read to
// its end, leave that body unread: the answer closes the connection, and
// the server stops reading it soon after (leaveGrace). Otherwise net/http
// reads up to 256 KiB of what is left before it sends the answer, waiting
// as long as the connection's read deadline for a client that sends
// nothing more.
// It applies to HTTP/1 only: an HTTP/2 stream's unread body holds up
// nothing, and Connection: close there would end every stream of the
// connection.
func leaveBody(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(leaveGrace))
}

// leaveGrace is how long, after the refusal has gone out, net/http may go
// on reading a body left unread before it closes the connection. With no
// grace at all it closes at once, with the client's bytes unread, and the
// kernel's reset can destroy the refusal before the client reads it (a
// client still sending a large body saw "connection reset by peer"
// instead of its 413); within the grace net/http reads up to 256 KiB, and
// a client still sending is given its FIN and half a second before the
// close, while one that sends nothing holds the connection no longer.
const leaveGrace = 100 * time.Millisecond

// boundBody bounds reading the rest of r's body by ReadTimeout from now,
// lifting the bound as the body ends, and has the box judged again as
// the body is read (rejudge), through info's body (the request's own,
// kept with it). Every capability reads its request's body through it.
// A request with no body is left with no bound: while its answer
// streams, the server reads the connection only to see whether the box
// has gone.
func (s *Server) boundBody(rc *http.ResponseController, r *http.Request, info *requestInfo) {
	if r.Body == nil || r.Body == http.NoBody {
		_ = rc.SetReadDeadline(time.Time{})
		return
	}
	info.body = boxBody{ReadCloser: r.Body, rc: *rc, srv: s, info: info, ctx: r.Context()}
	if s.cfg.ReadTimeout > 0 {
		_ = rc.SetReadDeadline(s.cfg.Now().Add(s.cfg.ReadTimeout))
	} else {
		_ = rc.SetReadDeadline(time.Time{})
		info.body.lifted = true // nothing to lift
	}
	r.Body = &info.body
}

// boxBody is a request body as a capability reads it: the box it was
// admitted for is judged again (rejudge) before each part of it is
// passed on, and the connection's read deadline is lifted once it has
// been read to its end. Once the box is refused, Read returns the error
// that cut the request, and what it read is not passed on: the upstream
// gets nothing more, and its request is broken off.
type boxBody struct {
	io.ReadCloser
	rc     http.ResponseController
	lifted bool
	srv    *Server
	info   *requestInfo
	ctx    context.Context // the request's
	cut    error           // once set, every Read returns it
}

func (b *boxBody) Read(p []byte) (int, error) {
	if b.cut != nil {
		return 0, b.cut
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if cut := b.srv.rejudge(b.ctx, b.info); cut != nil {
			b.cut = cut
			return 0, cut
		}
	}
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// BodyTimeout bounds reading a small request body the broker reads whole
// (a declaration report, or a body a capability's Scopes reads).
const BodyTimeout = 10 * time.Second

// wholeDecoded is the largest decoded body the broker holds whole, to
// forward it with its length declared (which a signing kind of egress
// secret needs, and many hosts want); a longer one goes on as it is
// decoded, of unknown length.
const wholeDecoded = 1 << 20

// decodeBody decodes r's gzip body, bounded by limit encoded and decoded,
// and puts it in r.Body with no Content-Encoding: whole, with its length,
// when it decodes to at most wholeDecoded bytes; streamed otherwise. A
// body that is not gzip is a 400, and one over limit a 413.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64) error {
	zr := proxy.Gunzip(r.Body, limit)
	held, err := io.ReadAll(io.LimitReader(zr, wholeDecoded+1))
	if err != nil {
		leaveBody(w, r)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			tl := capability.TooLarge(limit)
			tl.Message = strings.TrimSuffix(tl.Message, ".") + ", encoded or decoded."
			return tl
		}
		return capability.Refuse(capability.ReasonEncoding, "The request body could not be read as gzip, which its Content-Encoding names.").At(http.StatusBadRequest).WithErr(err)
	}
	// The length the box declared was the encoded body's.
	r.Header.Del("Content-Encoding")
	r.Header.Del("Content-Length")
	r.Body = proxy.PutBack(held, zr)
	if len(held) <= wholeDecoded {
		r.ContentLength = int64(len(held))
		return nil
	}
	r.ContentLength = -1
	return nil
}
