package broker

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/proxy"
)

// finish counts and records the request (observe) and logs the
// request's line, once its answer is over, even when the answer was
// aborted (the forwarder aborts a stream whose upstream fails by
// panicking with http.ErrAbortHandler, which is passed on once this is
// done). A request ServeHTTP concluded already is only logged.
func (s *Server) finish(rec *recorder, r *http.Request, info *requestInfo, trace *proxy.Trace, start time.Time) {
	aborted := recover()
	if !info.concluded {
		s.conclude(rec, r, info, trace, start, aborted != nil)
	}
	if ctx := r.Context(); !info.tallied && s.log.Enabled(ctx, slog.LevelInfo) {
		calls := info.calls
		// The attributes are built in place: no []any per request.
		var a [13]slog.Attr
		a[0] = slog.String("method", info.method)
		a[1] = slog.String("path", proxy.ScrubKept(r.URL.Path))
		a[2] = slog.String("route", info.route)
		a[3] = slog.Int("status", rec.status)
		a[4] = slog.Int64("bytes", rec.bytes)
		a[5] = slog.Float64("duration_ms", float64(info.duration.Microseconds())/1000)
		n := 6
		if info.box != "" {
			a[n] = slog.String("box", info.box)
			n++
		}
		if info.capability != "" {
			a[n] = slog.String("capability", info.capability)
			a[n+1] = slog.Any("words", info.words)
			n += 2
		}
		if len(calls) > 0 {
			last := calls[len(calls)-1]
			a[n] = slog.Int("upstream_status", last.Status)
			a[n+1] = slog.Float64("upstream_ms", float64(last.Latency.Microseconds())/1000)
			n += 2
		}
		if info.cost != 0 {
			a[n] = slog.Int64("cost_micros", info.cost)
			n++
		}
		if info.reason != "" {
			a[n] = slog.String("refusal", info.reason)
			n++
		}
		// The record is handed to the handler directly: slog.Logger
		// would take the caller's PC (runtime.Callers) for a source the
		// line does not show.
		line := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
		line.AddAttrs(a[:n]...)
		_ = s.log.Handler().Handle(ctx, line)
	}
	if aborted != nil {
		panic(aborted)
	}
}

// conclude settles what the request's record says (its duration,
// upstream calls, refusal reason, route), counts it and keeps its audit
// record (observe), which are so queued before the box has its answer.
func (s *Server) conclude(rec *recorder, r *http.Request, info *requestInfo, trace *proxy.Trace, start time.Time, aborted bool) {
	info.concluded = true
	// What the call's Call holds and observe did not take (a call
	// that keeps no audit entry) is journaled alone.
	defer info.call.Close()
	info.duration = s.cfg.Now().Sub(start)
	calls := trace.Calls()
	info.calls = calls
	info.cost = trace.Cost()
	if info.reason == "" {
		// A refusal a forwarder's ErrorHandler wrote, not the broker.
		info.reason = trace.Reason()
	}
	if info.reason == "" && aborted {
		info.reason = capability.ReasonAborted
	}
	if info.reason == "" && rec.status >= 500 && len(calls) > 0 && calls[len(calls)-1].Status == 0 {
		info.reason = capability.ReasonUpstreamFailed
	}
	if info.route == "" {
		info.route = routeUnmatched
	}
	if info.reason != "" && info.box == "" {
		// Refused before any box was known (no box's token, a path no
		// route serves, a method its route does not take): after the
		// first from its source for its reason, the refusal is kept in
		// aggregate (see Tally), counted exactly.
		info.tallied = s.tally.add(sourceOf(r), info.reason, start, info.method, info.route, info.capabilityLabel(), rec.status)
	}
	if info.stream {
		s.cfg.Metrics.StreamClosed(info.capabilityLabel())
	}
	// The record is kept in info, inside the request's one allocation.
	info.record = Record{
		At: start, Method: info.method, Route: info.route, Box: info.box,
		Capability: info.capabilityLabel(), Words: info.words, Public: info.public,
		Status: rec.status, Reason: info.reason, Message: info.message,
		Duration: info.duration, Bytes: rec.bytes, Cost: info.cost, Upstream: calls, Tallied: info.tallied,
		Call: info.call, Context: r.Context(),
	}
	s.observe(&info.record)
}

// requestInfo is what one request's log line says.
type requestInfo struct {
	// method is the request's method as the records keep it
	// (recordedMethod), judged once.
	method     string
	box        string
	capability string
	route      string
	words      []string
	public     bool
	reason     string
	message    string
	stream     bool
	// Set by conclude.
	concluded bool
	tallied   bool
	duration  time.Duration
	calls     []proxy.Call
	cost      int64 // micro-dollars, noted on the trace by the spend meter
	// call is the request's outbox Call (nil: none).
	call *outbox.Call
	// record is what conclude counts and keeps.
	record Record
	// lift is the request's body once boundBody bounds it, and admitted
	// what admit tells the capability of the call: kept here, in the
	// request's one allocation.
	lift     liftAtEnd
	admitted capability.Call
}

// capabilityLabel is the capability's name, or "none" for the
// declaration route and paths no capability serves.
func (i *requestInfo) capabilityLabel() string {
	if i.capability == "" {
		return "none"
	}
	return i.capability
}
