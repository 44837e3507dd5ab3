package server

import (
	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/metrics"
)

// observer is the broker's Observer: it turns each request's Record into
// metrics.
type observer struct {
	m *metrics.Metrics
}

var _ broker.Observer = (*observer)(nil)

// Request counts the request and its upstream calls.
func (o *observer) Request(rec *broker.Record) {
	o.m.Request(rec.Capability, rec.Route, rec.Status, rec.Reason, rec.Duration)
	for _, c := range rec.Upstream {
		o.m.Upstream(rec.Capability, c.Status, c.Latency)
	}
}

// StreamOpened counts a stream begun.
func (o *observer) StreamOpened(capability string) { o.m.StreamOpened(capability) }

// StreamClosed counts a stream ended.
func (o *observer) StreamClosed(capability string) { o.m.StreamClosed(capability) }

// DeclarationReport counts a report.
func (o *observer) DeclarationReport(kept bool) { o.m.DeclarationReport(kept) }
