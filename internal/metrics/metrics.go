// Package metrics is boxbroker's Prometheus metrics, kept in a registry of
// their own (never the global one) and served at /metrics on the admin
// listener.
//
// Every label is bounded: a capability name from the table, a route
// template (never a raw path with ids in it), a status code, a refusal
// reason from capability.Reasons, a grant outcome from the constants
// below, a payer kind, and a model name (the first MaxModels seen, then
// "other"). No metric carries a box name, a token, a credential or a value.
//
// A nil *Metrics is valid and records nothing, so a caller never needs to
// check.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Grant outcomes, the values of boxbroker_grant_checks_total's outcome
// label: the outcomes the payer reports for each chant-grant it checks
// (grant.Outcomes and payer.Unavailable, the same strings).
const (
	// GrantAccepted: the grant is the box's, current, and its person holds
	// a credential; the visitor pays.
	GrantAccepted = "accepted"
	// GrantMalformed: the header is not a grant value.
	GrantMalformed = "malformed"
	// GrantUnknown: no grant hashes to the value.
	GrantUnknown = "unknown"
	// GrantOtherBox: the grant was issued for another box.
	GrantOtherBox = "other-box"
	// GrantExpired: the grant has expired.
	GrantExpired = "expired"
	// GrantRevoked: the grant was revoked.
	GrantRevoked = "revoked"
	// GrantNoCredential: the person holds no credential here any more.
	GrantNoCredential = "no-credential"
	// GrantUnavailable: the grant could not be checked (the store did not
	// answer).
	GrantUnavailable = "unavailable"
	// GrantError counts any other outcome passed to Grant, so the label
	// stays bounded.
	GrantError = "error"
)

var grantOutcomes = map[string]bool{
	GrantAccepted: true, GrantMalformed: true, GrantUnknown: true, GrantOtherBox: true,
	GrantExpired: true, GrantRevoked: true, GrantNoCredential: true, GrantUnavailable: true, GrantError: true,
}

// Metrics holds boxbroker's collectors. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg             *prometheus.Registry
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	upstream        *prometheus.HistogramVec
	streams         *prometheus.GaugeVec
	declarations    *prometheus.CounterVec
	grants          *prometheus.CounterVec
	auditWritten    prometheus.Counter
	auditDropped    prometheus.Counter
	auditFailed     prometheus.Counter
	tokenRefusals   *prometheus.CounterVec
	feedbackDropped prometheus.Counter
	spend           *spendMetrics // spend.go
}

// New returns Metrics in a new registry, with the Go runtime's and the
// process's collectors beside boxbroker's own.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		requests: counterVec("boxbroker_requests_total",
			"Box-facing requests answered, by capability, route template, status and refusal reason (empty when not refused).",
			"capability", "route", "status", "reason"),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boxbroker_request_duration_seconds",
			Help:    "Time from a box-facing request's arrival to the end of its answer (a stream's whole length), by capability.",
			Buckets: []float64{.001, .005, .025, .1, .25, 1, 2.5, 10, 30, 120, 600},
		}, []string{"capability"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boxbroker_upstream_duration_seconds",
			Help:    "Time from sending a request upstream to its answer's headers, by capability and upstream status (error when none came).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"capability", "status"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "boxbroker_open_streams",
			Help: "Answers being streamed to boxes (text/event-stream) right now, by capability.",
		}, []string{"capability"}),
		declarations: counterVec("boxbroker_declaration_reports_total",
			"Declaration reports received, by outcome: kept, or refused.",
			"outcome"),
		grants: counterVec("boxbroker_grant_checks_total",
			"chant-grant headers checked, by outcome.",
			"outcome"),
		auditWritten: counter("boxbroker_audit_written_total",
			"Audit rows written to the store."),
		auditDropped: counter("boxbroker_audit_dropped_total",
			"Audit rows dropped because the queue to the store was full."),
		auditFailed: counter("boxbroker_audit_failed_total",
			"Audit rows lost because the store refused the write."),
		tokenRefusals: counterVec("boxbroker_token_refusals_total",
			"Box-facing requests refused for carrying no box's token, by how they are logged and audited: own (a line and a row each), or tallied (in aggregate, by source).",
			"kept"),
		feedbackDropped: counter("boxbroker_feedback_dropped_total",
			"Feedback batches dropped, oldest first, to keep a box within its bound (serve --feedback-max-batches, --feedback-max-bytes)."),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestDuration, m.upstream, m.streams, m.declarations, m.grants,
		m.auditWritten, m.auditDropped, m.auditFailed, m.tokenRefusals, m.feedbackDropped,
	)
	m.spend = newSpendMetrics(reg)
	for outcome := range grantOutcomes {
		m.grants.WithLabelValues(outcome) // exported at 0 before the first check
	}
	for _, outcome := range []string{"kept", "refused"} {
		m.declarations.WithLabelValues(outcome)
	}
	for _, kept := range []string{"own", "tallied"} {
		m.tokenRefusals.WithLabelValues(kept)
	}
	return m
}

// counter and counterVec make a counter, or a vector of them by labels,
// named name and described by help.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Handler serves the registry in Prometheus' text format, or in
// OpenMetrics' (with exemplars) to a scraper that asks for it; nil for
// nil Metrics.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return nil
	}
	// OpenMetrics, when the scraper asks for it, carries the latency
	// histograms' exemplars (trace ids; see Request).
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Registry is the registry the metrics are kept in, for tests and for a
// caller that adds its own collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Request counts one answered box-facing request. capability is "none"
// for the declaration route and a path no capability serves; route is a
// template; reason is "" when the request was not refused. The call's
// trace id (hex; "" for none) is kept as the latency histogram's
// exemplar, so a slow bucket leads to a trace; the exemplar is served in
// the OpenMetrics exposition only.
func (m *Metrics) Request(capability, route string, status int, reason string, d time.Duration, traceID string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(capability, route, strconv.Itoa(status), reason).Inc()
	observe(m.requestDuration.WithLabelValues(capability), d, traceID)
}

// Upstream records one upstream call's time to its answer's headers;
// status 0 means no answer came. traceID is kept as Request keeps it.
func (m *Metrics) Upstream(capability string, status int, d time.Duration, traceID string) {
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

// StreamOpened and StreamClosed bracket an answer streamed to a box.
func (m *Metrics) StreamOpened(capability string) {
	if m != nil {
		m.streams.WithLabelValues(capability).Inc()
	}
}

// StreamClosed ends what StreamOpened began.
func (m *Metrics) StreamClosed(capability string) {
	if m != nil {
		m.streams.WithLabelValues(capability).Dec()
	}
}

// DeclarationReport counts a declaration report, kept or refused.
func (m *Metrics) DeclarationReport(kept bool) {
	if m != nil {
		m.declarations.WithLabelValues(either(kept, "kept", "refused")).Inc()
	}
}

// either is yes when b holds, else no: the value of a label of two.
func either(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// Grant counts one chant-grant check with its outcome, one of the Grant*
// constants; any other value is counted as GrantError, so the label stays
// bounded.
func (m *Metrics) Grant(outcome string) {
	if m == nil {
		return
	}
	if !grantOutcomes[outcome] {
		outcome = GrantError
	}
	m.grants.WithLabelValues(outcome).Inc()
}

// AuditWritten counts n audit rows written.
func (m *Metrics) AuditWritten(n int) {
	if m != nil {
		m.auditWritten.Add(float64(n))
	}
}

// AuditDropped counts one audit row dropped for a full queue.
func (m *Metrics) AuditDropped() {
	if m != nil {
		m.auditDropped.Inc()
	}
}

// AuditFailed counts n audit rows the store refused.
func (m *Metrics) AuditFailed(n int) {
	if m != nil {
		m.auditFailed.Add(float64(n))
	}
}

// TokenRefusal counts one request refused for carrying no box's token:
// tallied when it is logged and audited only in aggregate.
func (m *Metrics) TokenRefusal(tallied bool) {
	if m != nil {
		m.tokenRefusals.WithLabelValues(either(tallied, "tallied", "own")).Inc()
	}
}

// FeedbackDropped counts n feedback batches dropped to keep a box within
// its bound.
func (m *Metrics) FeedbackDropped(n int) {
	if m != nil {
		m.feedbackDropped.Add(float64(n))
	}
}

// DeadLetters registers read, called at each scrape, as the source of
// boxbroker_spool_dead_letters: the batches the store refused for good
// and the spool set aside in the data directory (see outbox.DeadFile),
// waiting for an operator to retry or drop them. It is called once,
// before serving.
func (m *Metrics) DeadLetters(read func() int) {
	if m == nil || read == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "boxbroker_spool_dead_letters",
		Help: "Batches of records (settlements, audit entries) the store refused for good, set aside in the data directory until an operator retries or drops them (boxbroker spool dead).",
	}, func() float64 { return float64(read()) }))
}
