package server

import (
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// maxAuditMessage bounds a refusal message kept in the audit log.
const maxAuditMessage = 1000

// observer is the broker's Observer: it turns each request's Record into
// metrics and an audit entry.
type observer struct {
	m      *metrics.Metrics
	outbox *outbox.Outbox // nil: no audit log
	// tracing traces the call (nil: off); the latency histograms'
	// exemplars name its trace.
	tracing *telemetry.Tracing
}

var _ broker.Observer = (*observer)(nil)

// Request counts the request and its upstream calls.
func (o *observer) Request(rec *broker.Record) {
	var traceID string
	if o.tracing != nil {
		defer o.tracing.Record(rec.Context, &telemetry.Call{Box: rec.Box, Capability: rec.Capability, Route: rec.Route,
			Method: rec.Method, Reason: rec.Reason, Status: rec.Status, Cost: rec.Cost})()
		traceID = telemetry.TraceID(rec.Context)
	}
	o.m.RequestTraced(rec.Capability, rec.Route, rec.Status, rec.Reason, rec.Duration, traceID)
	for _, c := range rec.Upstream {
		o.m.UpstreamTraced(rec.Capability, c.Status, c.Latency, traceID)
	}
	if rec.Reason == "token" && rec.Box == "" {
		o.m.TokenRefusal(rec.Tallied)
	}
	if o.outbox != nil && !rec.Tallied && (rec.Reason != "" || !rec.Public) {
		// Journaled before the box has the end of its answer; a
		// journal that cannot write says so, and the broker then cannot
		// record.
		// The call's settlement, when its Call holds one, shares the
		// entry's record.
		o.outbox.RecordCall(rec.Call, auditEntry(rec))
	}
}

// TokenRefusals keeps one audit entry for a source's tallied refusals
// of one reason.
func (o *observer) TokenRefusals(t *broker.Tally) {
	if o.outbox != nil {
		o.outbox.Add(tallyEntry(t))
	}
}

// tallyEntry is the audit entry for t: no box, refused for its reason,
// at the first refusal tallied, with the count, source and span in its
// message.
func tallyEntry(t *broker.Tally) store.AuditEntry {
	what := fmt.Sprintf("were refused (%s) before any box was known", t.Reason)
	if t.Reason == capability.ReasonToken {
		what = "carried no box's token"
	}
	return store.AuditEntry{
		At: t.From, Method: t.Method, Route: t.Route, Capability: t.Capability, Status: t.Status, Reason: t.Reason,
		Message: fmt.Sprintf("%d more requests from %s %s from %s to %s, each refused; they are kept in this one entry.",
			t.Count, t.Source, what, t.From.UTC().Format(time.RFC3339Nano), t.To.UTC().Format(time.RFC3339Nano)),
	}
}

// auditEntry is what the audit log keeps of rec: every refusal, and every
// request served for a box (a public request that was answered is not
// kept).
func auditEntry(rec *broker.Record) store.AuditEntry {
	msg := rec.Message
	if len(msg) > maxAuditMessage {
		msg = msg[:maxAuditMessage]
	}
	return store.AuditEntry{
		Box: rec.Box, At: rec.At, Method: rec.Method, Route: rec.Route, Capability: rec.Capability,
		Words: append([]string(nil), rec.Words...), Status: rec.Status, Reason: rec.Reason, Message: msg,
		Duration: rec.Duration, UpstreamStatus: rec.UpstreamStatus(), PaidBy: paidBy(rec), Bytes: rec.Bytes, Cost: rec.Cost,
	}
}

// StreamOpened counts a stream begun.
func (o *observer) StreamOpened(capability string) { o.m.StreamOpened(capability) }

// StreamClosed counts a stream ended.
func (o *observer) StreamClosed(capability string) { o.m.StreamClosed(capability) }

// DeclarationReport counts a report.
func (o *observer) DeclarationReport(kept bool) { o.m.DeclarationReport(kept) }
