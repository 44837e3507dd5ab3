package broker

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/proxy"
)

// Observer is told of every box-facing request, for metrics and the audit
// log. Its methods are called on the request's own goroutine, so they must
// not block: one that writes somewhere slow queues the write.
type Observer interface {
	// Request is called once per request, when its answer is over.
	Request(rec *Record)
	// StreamOpened is called when an answer begins as text/event-stream,
	// and StreamClosed when that answer ends.
	StreamOpened(capability string)
	StreamClosed(capability string)
	// DeclarationReport is called for each POST /api/box/declaration:
	// kept is false when the report was refused.
	DeclarationReport(kept bool)
	// TokenRefusals is called as a window ends, once for each source
	// and reason whose refusals made before a box was known (carrying no
	// box's token, or refused before the token was read) were tallied in
	// it: the Records of those refusals had Tallied set.
	TokenRefusals(t *Tally)
}

// Record is what the broker knows of one request once it is answered. It
// holds no token, credential, secret value, query or body, and its Route
// is a template rather than the path. The broker scrubs every Record
// before its Observer is told of it: a method no route serves is
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
	// settlement: an Observer that keeps the request's audit entry
	// journals both in one record (outbox.Outbox.RecordCall). What it
	// does not take is journaled alone once the Observer returns.
	Call *outbox.Call
	// Context is the request's context, for tracing (its span, see
	// package telemetry); it is done once the answer is over.
	Context context.Context
}

// UpstreamStatus is the status of the last upstream call, 0 when none
// answered or none was made.
func (r *Record) UpstreamStatus() int {
	if len(r.Upstream) == 0 {
		return 0
	}
	return r.Upstream[len(r.Upstream)-1].Status
}
