package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RequestTraced is Request with the call's trace id (hex; "" for none)
// kept as the latency histogram's exemplar, so a slow bucket leads to a
// trace. The exemplar is served in the OpenMetrics exposition only.
func (m *Metrics) RequestTraced(capability, route string, status int, reason string, d time.Duration, traceID string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(capability, route, strconv.Itoa(status), reason).Inc()
	observe(m.requestDuration.WithLabelValues(capability), d, traceID)
}

// UpstreamTraced is Upstream with the call's trace id (hex; "" for none)
// kept as the latency histogram's exemplar.
func (m *Metrics) UpstreamTraced(capability string, status int, d time.Duration, traceID string) {
	if m == nil {
		return
	}
	s := "error"
	if status > 0 {
		s = strconv.Itoa(status)
	}
	observe(m.upstream.WithLabelValues(capability, s), d, traceID)
}

// observe records d in o, with traceID as its exemplar when there is one.
func observe(o prometheus.Observer, d time.Duration, traceID string) {
	if traceID != "" {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": traceID})
			return
		}
	}
	o.Observe(d.Seconds())
}
