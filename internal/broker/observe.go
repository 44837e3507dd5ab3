package broker

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// Record is what the broker knows of one request once it is answered. It
// holds no token, credential, secret value, query or body, and its Route
// is a template rather than the path. The broker scrubs every Record
// before it counts it in its Metrics and keeps it in its Outbox: a method no route serves is
// OtherMethod, and any token in its strings (a refusal may quote what a
// box sent) is replaced.
type Record struct {
	// At is when the request arrived.
	At time.Time
	// Method is the request's method, when a route could serve it (one
	// of capability.StandardMethods, or CONNECT); OtherMethod otherwise.
	Method string
	// Route is the route template, such as "/llm/anthropic/v1/messages";
	// "{unmatched}" for a path no capability owns.
	Route string
	// Box is the box whose token the request carried; "" when none was
	// recognised.
	Box string
	// Capability is the capability's name; "none" for the declaration
	// route and paths no capability owns.
	Capability string
	// Words are the scope words the request needed.
	Words []string
	// Public is true for a request served with no token (hello).
	Public bool
	// Status is the answer's status.
	Status int
	// Reason is why the broker refused the request: one of
	// capability.Reasons (such as "token", "declaration", "budget",
	// "paused", "no secret"), never a status's text; "" when it did not.
	Reason string
	// Message is the refusal message the box was shown ("" when none);
	// a not-found message names the route, not the path.
	Message string
	// Duration is from arrival to the end of the answer.
	Duration time.Duration
	// Bytes is the answer body's size.
	Bytes int64
	// Cost is the measured cost of the request's model calls in
	// micro-dollars, as the spend meter priced them (0 when none was
	// priced).
	Cost int64
	// Upstream are the upstream calls made for the request, in order.
	Upstream []proxy.Call
	// Tallied is true for a refusal made before a box was known (the
	// request carried no box's token, or was refused before it was read)
	// that is kept in aggregate: it is counted, but neither logged nor
	// recorded on its own; a Tally tells of it when its window ends.
	Tallied bool
	// Call, when not nil, is the request's outbox Call, holding its
	// settlement: the request's audit entry and the settlement are
	// journaled in one record (outbox.Outbox.RecordCall). A settlement
	// of a request that keeps no audit entry is journaled alone.
	Call *outbox.Call
	// Context is the request's context, for tracing (its span, see
	// package telemetry); it is done once the answer is over.
	Context context.Context
}

// OtherMethod is the method the broker's records (its log lines and the
// audit log) give a request in a method no route serves: HTTP allows a
// method to be any token, a box's own token included, so a method other
// than capability.StandardMethods' and CONNECT (the HTTPS proxy's) is
// never kept as it was sent.
const OtherMethod = "OTHER"

// recordedMethod is method as the broker's records keep it.
func recordedMethod(method string) string {
	if capability.MethodOf(method) != 0 || method == http.MethodConnect {
		return method
	}
	return OtherMethod
}

// scrub makes rec keep nothing a box sent that can hold a token: its
// method is OtherMethod unless a route could serve it, and every token,
// or what is left of one, in its route, box, capability, words, reason
// and message is replaced (proxy.ScrubKept). A refusal may quote what a
// box sent (a Host, a path, an id), and a box may send its token, or
// another's, anywhere.
func (rec *Record) scrub() {
	rec.Method = recordedMethod(rec.Method)
	rec.Route = proxy.ScrubKept(rec.Route)
	rec.Box = proxy.ScrubKept(rec.Box)
	rec.Capability = proxy.ScrubKept(rec.Capability)
	rec.Reason = proxy.ScrubKept(rec.Reason)
	rec.Message = proxy.ScrubKept(rec.Message)
	rec.Words = proxy.ScrubKeptAll(rec.Words)
}

// UpstreamStatus is the status of the last upstream call, 0 when none
// answered or none was made.
func (r *Record) UpstreamStatus() int {
	if len(r.Upstream) == 0 {
		return 0
	}
	return r.Upstream[len(r.Upstream)-1].Status
}

// maxAuditMessage bounds a refusal message kept in the audit log.
const maxAuditMessage = 1000

// observe scrubs rec (see Record.scrub), traces it (Tracing), counts it
// and its upstream calls in the Metrics (their latencies' exemplars
// naming its trace), and keeps its audit entry in the Outbox: every
// refusal, and every request served for a box (a public request that
// was answered is not kept, nor is a refusal tallied). The entry is
// journaled before the box has the end of its answer; a journal that
// cannot write says so, and the broker then cannot record (Recording).
func (s *Server) observe(rec *Record) {
	rec.scrub()
	m := s.cfg.Metrics
	var traceID string
	if s.cfg.Tracing != nil && rec.Context != nil {
		defer s.cfg.Tracing.Record(rec.Context, &telemetry.Call{Box: rec.Box, Capability: rec.Capability, Route: rec.Route,
			Method: rec.Method, Reason: rec.Reason, Status: rec.Status, Cost: rec.Cost})()
		traceID = telemetry.TraceID(rec.Context)
	}
	m.Request(rec.Capability, rec.Route, rec.Status, rec.Reason, rec.Duration, traceID)
	for _, c := range rec.Upstream {
		if c.Cut {
			// The broker broke the call off (its box was refused):
			// the request counts as the broker's refusal, and the
			// call as no upstream's error.
			continue
		}
		m.Upstream(rec.Capability, c.Status, c.Latency, traceID)
	}
	if rec.Reason == capability.ReasonToken && rec.Box == "" {
		m.TokenRefusal(rec.Tallied)
	}
	if s.cfg.Outbox != nil && !rec.Tallied && (rec.Reason != "" || !rec.Public) {
		// The call's settlement, when its Call holds one, shares the
		// entry's record.
		s.cfg.Outbox.RecordCall(rec.Call, rec.AuditEntry())
	}
}

// AuditEntry is what the audit log keeps of rec: its message cut to
// 1,000 bytes, and the pool entry its last upstream call was paid by.
func (rec *Record) AuditEntry() store.AuditEntry {
	msg := rec.Message
	if len(msg) > maxAuditMessage {
		msg = msg[:maxAuditMessage]
	}
	paidBy := ""
	if len(rec.Upstream) > 0 {
		paidBy = rec.Upstream[len(rec.Upstream)-1].Entry
	}
	return store.AuditEntry{
		Box: rec.Box, At: rec.At, Method: rec.Method, Route: rec.Route, Capability: rec.Capability,
		Words: append([]string(nil), rec.Words...), Status: rec.Status, Reason: rec.Reason, Message: msg,
		Duration: rec.Duration, UpstreamStatus: rec.UpstreamStatus(), PaidBy: paidBy, Bytes: rec.Bytes, Cost: rec.Cost,
	}
}

// keepTally keeps one audit entry for a source's tallied refusals of one
// reason: no box, refused for its reason, at the first refusal tallied,
// with the count, source and span in its message.
func (s *Server) keepTally(t *Tally) {
	if s.cfg.Outbox == nil {
		return
	}
	what := fmt.Sprintf("were refused (%s) before any box was known", t.Reason)
	if t.Reason == capability.ReasonToken {
		what = "carried no box's token"
	}
	s.cfg.Outbox.Add(store.AuditEntry{
		At: t.From, Method: t.Method, Route: t.Route, Capability: t.Capability, Status: t.Status, Reason: t.Reason,
		Message: fmt.Sprintf("%d more requests from %s %s from %s to %s, each refused; they are kept in this one entry.",
			t.Count, t.Source, what, t.From.UTC().Format(time.RFC3339Nano), t.To.UTC().Format(time.RFC3339Nano)),
	})
}
