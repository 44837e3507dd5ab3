package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// unavailableRetryAfter is the Retry-After of every 503, in seconds.
const unavailableRetryAfter = "1"

func unavailable(err error) error {
	return &capability.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeAPI,
		Message: "The broker cannot read its store just now; try again shortly.", Err: err}
}

// writeError renders err as a refusal; an internal error's text is logged,
// never shown.
func (s *Server) writeError(w *recorder, r *http.Request, err error, info *requestInfo) {
	var ce *capability.Error
	if !errors.As(err, &ce) {
		ce = &capability.Error{Status: http.StatusBadGateway, Type: protocol.TypeAPI, Message: "The broker could not complete the request.", Err: err}
	}
	if ce.Err != nil {
		s.log.Error("request failed", "method", recordedMethod(r.Method), "path", proxy.ScrubKept(r.URL.Path), "route", info.route, "box", info.box, "err", ce.Err)
	}
	if w.wrote {
		return // the answer has begun; nothing more can be said
	}
	if info.reason == "" {
		info.reason = http.StatusText(ce.Status)
	}
	for k, vs := range ce.Header {
		w.Header()[k] = vs
	}
	var ra *retryAfterError
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", ra.retryAfter())
	}
	if ce.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// The store or the spool did not answer in time: an outage is
		// seconds long or longer, and a retry a second later finds it
		// over or is answered as fast.
		w.Header().Set("Retry-After", unavailableRetryAfter)
	}
	info.message = ce.Message
	if ce.Status == http.StatusNotFound {
		// A not-found message repeats the path, which may hold anything;
		// what is kept names the route instead.
		info.message = fmt.Sprintf("The broker serves no %s %s.", recordedMethod(r.Method), info.route)
	}
	protocol.WriteRefusal(w, ce.Status, ce.Type, ce.Message)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		protocol.WriteRefusal(w, http.StatusInternalServerError, protocol.TypeAPI, "The broker could not encode its answer.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
