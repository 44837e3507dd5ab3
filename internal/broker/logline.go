package broker

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
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
	if ctx := r.Context(); !info.Tallied && s.log.Enabled(ctx, slog.LevelInfo) {
		calls := info.Upstream
		// The attributes are built in place: no []any per request.
		var a [13]slog.Attr
		a[0] = slog.String("method", info.Method)
		a[1] = slog.String("path", proxy.ScrubKept(r.URL.Path))
		a[2] = slog.String("route", info.Route)
		a[3] = slog.Int("status", rec.status)
		a[4] = slog.Int64("bytes", rec.bytes)
		a[5] = slog.Float64("duration_ms", float64(info.Duration.Microseconds())/1000)
		n := 6
		if info.Box != "" {
			a[n] = slog.String("box", info.Box)
			n++
		}
		if info.Capability != noCapability {
			a[n] = slog.String("capability", info.Capability)
			a[n+1] = slog.Any("words", info.Words)
			n += 2
		}
		if len(calls) > 0 {
			last := calls[len(calls)-1]
			a[n] = slog.Int("upstream_status", last.Status)
			a[n+1] = slog.Float64("upstream_ms", float64(last.Latency.Microseconds())/1000)
			n += 2
		}
		if info.Cost != 0 {
			a[n] = slog.Int64("cost_micros", info.Cost)
			n++
		}
		if info.Reason != "" {
			a[n] = slog.String("refusal", info.Reason)
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
	defer info.Call.Close()
	info.Duration = s.cfg.Now().Sub(start)
	calls := trace.Calls()
	info.Upstream = calls
	info.Cost = trace.Cost()
	if ce := info.judged.refused(); ce != nil {
		// The box was refused as the request was served: whatever the
		// capability made of the cut request, this is why it ended.
		info.Reason = capability.ReasonOf(ce)
	}
	if info.Reason == "" {
		// A refusal a forwarder's ErrorHandler wrote, not the broker.
		info.Reason = trace.Reason()
	}
	if info.Reason == "" && aborted {
		info.Reason = capability.ReasonAborted
	}
	if info.Reason == "" && rec.status >= 500 && len(calls) > 0 && calls[len(calls)-1].Status == 0 {
		info.Reason = capability.ReasonUpstreamFailed
	}
	if info.Route == "" {
		info.Route = routeUnmatched
	}
	if info.Reason != "" && info.Box == "" {
		// Refused before any box was known (no box's token, a path no
		// route serves, a method its route does not take): after the
		// first from its source for its reason, the refusal is kept in
		// aggregate (see Tally), counted exactly.
		info.Tallied = s.tally.add(sourceOf(r), info.Reason, start, info.Method, info.Route, info.capabilityLabel(), rec.status)
	}
	if info.stream {
		s.cfg.Metrics.StreamClosed(info.capabilityLabel())
	}
	info.At, info.Status, info.Bytes, info.Context = start, rec.status, rec.bytes, r.Context()
	if info.Capability == "" {
		// Only then: a read of the request's body may still judge its
		// box (rejudge, on the transport's goroutine), by Capability.
		info.Capability = noCapability
	}
	s.observe(&info.Record)
}

// requestInfo is what the broker knows of one request as it is served:
// its Record, which conclude completes, counts and keeps, and the
// request's log line tells of, and what serving it needs besides.
type requestInfo struct {
	// Record's Method is the request's method as the records keep it
	// (recordedMethod), judged once; its Capability is "" until conclude
	// makes it the label (capabilityLabel).
	Record
	stream    bool
	concluded bool // set by conclude
	// body is the request's body once boundBody wraps it, and admitted
	// what admit tells the capability of the call: kept here, in the
	// request's one allocation.
	body     boxBody
	admitted capability.Call
	// from is where the request came from, as its token is judged
	// (source), and judged what judging it again keeps (rejudge).
	from   netip.Addr
	judged judged
}

// noCapability is the capability label of the declaration route and of
// paths no capability serves.
const noCapability = "none"

// capabilityLabel is the capability's name, or noCapability.
func (i *requestInfo) capabilityLabel() string {
	if i.Capability == "" {
		return noCapability
	}
	return i.Capability
}
