package broker

import (
	"log/slog"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/proxy"
)

// unavailableRetryAfter is the Retry-After of every 503, in seconds.
const unavailableRetryAfter = "1"

// writeError renders err as a refusal; an internal error's text is logged,
// never shown.
func (s *Server) writeError(w *recorder, r *http.Request, err error, info *requestInfo) {
	ce := s.refusalOf(r, err, info.Route, info.Box)
	if w.wrote {
		return // the answer has begun; nothing more can be said
	}
	if info.Reason == "" {
		info.Reason = capability.ReasonOf(ce)
	}
	info.Message = ce.Message
	if ce.Status == http.StatusNotFound {
		// A not-found message repeats the path, which may hold anything;
		// what is kept names the route instead.
		info.Message = capability.NotFoundMessage(info.Method, info.Route)
	}
	writeRefusal(w, ce)
}

// Refuse answers r, a request the broker's handler does not serve (the
// HTTPS proxy's CONNECT, or a request it refuses before handing it to
// the handler), with the refusal err, written as ServeHTTP writes every
// refusal: a *capability.Error keeps its status, message and Header, a
// refusal of the box's limits has its Retry-After and any 503 one of a
// second, and any other error is a 502 whose text is logged, never
// shown. rec, the request's record, is completed with the refusal's
// status, reason and message (and its duration, when it has none) and
// counted and kept as every request's record is, when it names a box; a refusal
// of no box's token is not recorded one by one. A body r carries is
// left unread (leaveBody): the refusal goes out at once, and the
// connection closes, however slowly the client sends it, on a listener
// (the proxy's) that bounds no body's reading.
func (s *Server) Refuse(w http.ResponseWriter, r *http.Request, err error, rec *Record) {
	ce := s.refusalOf(r, err, rec.Route, rec.Box)
	leaveBody(w, r)
	writeRefusal(w, ce)
	// One line a refusal, as the handler logs one a request; a refusal
	// that names no box (no token, or no box's) only at debug, since it
	// costs its sender nothing and so could flood the log.
	level := slog.LevelInfo
	if rec.Box == "" {
		level = slog.LevelDebug
	}
	s.log.LogAttrs(r.Context(), level, "proxy refusal",
		slog.String("method", recordedMethod(r.Method)), slog.String("route", proxy.ScrubKept(rec.Route)),
		slog.String("box", rec.Box), slog.Int("status", ce.Status), slog.String("refusal", capability.ReasonOf(ce)))
	if rec.Box == "" {
		return
	}
	rec.Status, rec.Reason, rec.Message = ce.Status, capability.ReasonOf(ce), ce.Message
	if rec.Duration == 0 {
		rec.Duration = s.cfg.Now().Sub(rec.At)
	}
	s.observe(rec)
}

// refusalOf is err as the refusal the box is shown (capability.Of). An
// error a refusal carries (Err) is logged at its level (LogLevel: an
// upstream's failure at WARN, as the forwarders log it); the broker's cut of the
// request (capability.Cut), the box's refusal, only at Debug.
func (s *Server) refusalOf(r *http.Request, err error, route, box string) *capability.Error {
	ce := capability.Of(err)
	if reason, cut := capability.Cut(err); cut {
		s.log.Debug("request cut by its box's refusal", "method", recordedMethod(r.Method), "route", route, "box", box, "refusal", reason)
		return ce
	}
	if ce.Err != nil {
		s.log.Log(r.Context(), ce.LogLevel(), "request failed", "method", recordedMethod(r.Method), "path", proxy.ScrubKept(r.URL.Path), "route", route, "box", box, "err", ce.Err)
	}
	return ce
}

// writeRefusal writes the refusal ce (Error.Write: its Header holds the
// Retry-After of a refusal of the box's limits), and gives a 503 whose
// Header has none a Retry-After of a second.
func writeRefusal(w http.ResponseWriter, ce *capability.Error) {
	if ce.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// The store or the spool did not answer in time: an outage is
		// seconds long or longer, and a retry a second later finds it
		// over or is answered as fast.
		w.Header().Set("Retry-After", unavailableRetryAfter)
	}
	ce.Write(w)
}
