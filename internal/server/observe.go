package server

import (
	"github.com/intentius/boxbroker/internal/audit"
	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/store"
)

// maxAuditMessage bounds a refusal message kept in the audit log.
const maxAuditMessage = 1000

// observer is the broker's Observer: it turns each request's Record into
// metrics and an audit entry.
type observer struct {
	m     *metrics.Metrics
	audit *audit.Writer
}

var _ broker.Observer = (*observer)(nil)

// Request counts the request and its upstream calls.
func (o *observer) Request(rec *broker.Record) {
	o.m.Request(rec.Capability, rec.Route, rec.Status, rec.Reason, rec.Duration)
	for _, c := range rec.Upstream {
		o.m.Upstream(rec.Capability, c.Status, c.Latency)
	}
	if o.audit != nil && (rec.Reason != "" || !rec.Public) {
		o.audit.Add(auditEntry(rec))
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
		Duration: rec.Duration, UpstreamStatus: rec.UpstreamStatus(),
	}
}

// StreamOpened counts a stream begun.
func (o *observer) StreamOpened(capability string) { o.m.StreamOpened(capability) }

// StreamClosed counts a stream ended.
func (o *observer) StreamClosed(capability string) { o.m.StreamClosed(capability) }

// DeclarationReport counts a report.
func (o *observer) DeclarationReport(kept bool) { o.m.DeclarationReport(kept) }
