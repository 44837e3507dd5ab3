// Package telemetry is boxbroker's OpenTelemetry tracing: one trace per
// box call, exported over OTLP/HTTP by the OpenTelemetry Go SDK.
//
// Tracing is off unless the standard OTEL_* environment variables ask for
// it (see Enabled); off, New returns a nil *Tracing, whose methods do
// nothing and cost nothing beyond a nil check, and the server installs
// none of its wrappers.
//
// A trace is a "box call" span (the server's) with three kinds of
// children: "admission" (from the call's arrival to its first upstream
// call, or to its answer when it made none), one "upstream" span per
// upstream call, and "record" (the call's metrics and audit row). Spans
// carry the box's name, the capability, the route template, the model,
// the payer's kind, the status, the refusal reason and the tokens the
// answer reported. They never carry a header, a body, a query, a path
// with ids in it, a token, a credential or a secret's value: every
// attribute is set here, from the list in this file, and no
// instrumentation library adds its own.
//
// A box's traceparent header is not followed: a box is not trusted to
// join the operator's traces, so every call starts a trace of its own.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/quiet"
)

// Attribute keys set on a box call's spans. They are the whole list: no
// other attribute is ever set.
const (
	AttrBox        = attribute.Key("boxbroker.box")
	AttrCapability = attribute.Key("boxbroker.capability")
	AttrRoute      = attribute.Key("http.route")
	AttrMethod     = attribute.Key("http.request.method")
	AttrStatus     = attribute.Key("http.response.status_code")
	AttrReason     = attribute.Key("boxbroker.reason")
	AttrModel      = attribute.Key("gen_ai.request.model")
	AttrPayer      = attribute.Key("boxbroker.payer.kind")
	AttrInput      = attribute.Key("gen_ai.usage.input_tokens")
	AttrOutput     = attribute.Key("gen_ai.usage.output_tokens")
	AttrCacheRead  = attribute.Key("boxbroker.usage.cache_read_tokens")
	AttrCacheWrite = attribute.Key("boxbroker.usage.cache_write_tokens")
	AttrCost       = attribute.Key("boxbroker.cost_micros")
	AttrServer     = attribute.Key("server.address")
)

// ErrUnsupported is returned by New for an OTEL_* setting this package
// does not serve (a traces exporter other than otlp or none, an OTLP
// protocol other than http/protobuf).
var ErrUnsupported = errors.New("telemetry: unsupported OpenTelemetry setting")

// Enabled reports whether the OTEL_* variables getenv reads ask for
// traces: OTEL_SDK_DISABLED is not "true", OTEL_TRACES_EXPORTER is not
// "none", and OTEL_TRACES_EXPORTER is "otlp" or an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT).
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch exp {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// unsupported returns an error wrapping ErrUnsupported for an OTEL_*
// setting this package does not serve: a traces exporter other than otlp
// or none, whether or not an endpoint is set (it asks for traces
// elsewhere, which would otherwise go unsent without a word), and an
// OTLP protocol other than http/protobuf when traces are on (Enabled);
// a protocol set for other programs while traces are off stops nothing.
// It returns nil when OTEL_SDK_DISABLED is "true", which turns tracing
// off whatever else is set.
func unsupported(getenv func(string) string) error {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil
	}
	if exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" && exp != "none" {
		return fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (only otlp or none)", ErrUnsupported, exp)
	}
	if !Enabled(getenv) {
		return nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(k)); p != "" && p != "http/protobuf" {
			return fmt.Errorf("%w: %s=%q (only http/protobuf)", ErrUnsupported, k, p)
		}
	}
	return nil
}

// Tracing starts and exports box calls' traces. A nil *Tracing is valid:
// it traces nothing.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New returns the Tracing the process's OTEL_* environment variables
// configure, or nil (and no error) when they ask for none (see Enabled). The OTLP
// exporter itself reads the endpoint, headers, timeout, compression and
// certificate variables (OTEL_EXPORTER_OTLP_*), the batch processor the
// OTEL_BSP_* ones, the sampler OTEL_TRACES_SAMPLER and its argument, and
// the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the
// service name is "boxbroker" when none is set. It returns an error
// wrapping ErrUnsupported for a setting it does not serve, one for an
// endpoint or header the SDK cannot read (see unreadable), and one for
// headers that plain http would carry off this machine. Nothing is
// sent until a span ends. The SDK's own errors (an export that failed)
// go to log at WARN (nil: slog.Default()); the SDK keeps its error
// handler process-wide, so the last New's log receives them.
func New(ctx context.Context, log *slog.Logger) (*Tracing, error) {
	getenv := os.Getenv
	if err := unsupported(getenv); err != nil {
		return nil, err
	}
	if !Enabled(getenv) {
		return nil, nil
	}
	if err := unreadable(getenv); err != nil {
		return nil, err
	}
	sent := exportSent(getenv)
	if len(sent.Header) > 0 && quiet.InClear(sent.URL) {
		return nil, fmt.Errorf("telemetry: the OTLP endpoint %s://%s is plain http to another machine, and the headers of OTEL_EXPORTER_OTLP_HEADERS would cross the network in the clear: use https (http only on a loopback host)",
			sent.URL.Scheme, sent.URL.Host)
	}
	defaults.Logger(&log)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		// A collector's refusal is quoted whole in the error (up to the
		// 4 MiB the SDK reads of it): a line of the log keeps its start.
		log.Warn("telemetry: OpenTelemetry", "err", quiet.Cut(err.Error(), maxLoggedError))
	}))
	otlp, err := otlptracehttp.New(ctx, otlptracehttp.WithProxy(pinned(sent.URL)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	exp := quietExporter{SpanExporter: otlp, sent: sent}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName("boxbroker")),
		resource.Environment(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{tp: tp, tracer: tp.Tracer("github.com/intentius/boxbroker/internal/telemetry")}, nil
}

// maxLoggedError bounds the text of an export's error (quoting the
// collector's refusal) and of any SDK error kept in a log line.
const maxLoggedError = 4 << 10

// pinned is the exporter's proxy function: every request the exporter's
// client sends goes to the endpoint's scheme and host, through the proxy
// the environment names for it, if any, and a request anywhere else (a
// redirect the collector answered, which the SDK's client follows with
// the collector's headers, and its body again on a 307 or 308) fails
// before it is sent. The SDK takes no client of its own with the
// certificate and timeout variables read (otlptracehttp.WithHTTPClient
// drops them), so this is where a redirect is refused.
func pinned(to *url.URL) func(*http.Request) (*url.URL, error) {
	return func(r *http.Request) (*url.URL, error) {
		if r.URL.Scheme != to.Scheme || !strings.EqualFold(r.URL.Host, to.Host) {
			return nil, errors.New("telemetry: the collector redirected the export away from the OTLP endpoint; not followed")
		}
		return http.ProxyFromEnvironment(r)
	}
}

// quietExporter is the OTLP exporter with what its requests carry kept
// out of its errors (quiet.Err): Go's transport quotes what a collector
// answered when it cannot read it, and a collector may repeat the
// header it was sent (OTEL_EXPORTER_OTLP_HEADERS, a bearer token as
// often as not) into an error the SDK hands to the log, or a flush
// returns. The error's text is cut to maxLoggedError: the SDK quotes a
// collector's refusal whole in it, up to 4 MiB.
type quietExporter struct {
	sdktrace.SpanExporter
	sent *http.Request
}

func (e quietExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := quiet.Err(e.SpanExporter.ExportSpans(ctx, spans), e.sent)
	if err == nil {
		return nil
	}
	return quiet.Reword(err, quiet.Cut(err.Error(), maxLoggedError))
}

// unreadable returns an error naming the variable for an OTLP endpoint
// or header the SDK cannot read, which the SDK would log, value and all,
// through its own logger (the process's stderr, past the broker's log):
// an endpoint that is no URL, a header pair with no "=" (written
// "Name: value", as HTTP writes it), with no header's name before its
// "=" (the same, of a key padded with "="), or whose value's
// percent-escapes do not decode. The error never quotes the pair: it
// may hold a key.
func unreadable(getenv func(string) string) error {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			if _, err := url.Parse(v); err != nil {
				return fmt.Errorf("telemetry: %s is not a URL", k)
			}
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if strings.TrimSpace(getenv(k)) == "" {
			continue
		}
		for i, pair := range strings.Split(getenv(k), ",") {
			name, v, ok := strings.Cut(pair, "=")
			if !ok && strings.TrimSpace(pair) != "" || ok && !httpguts.ValidHeaderFieldName(strings.TrimSpace(name)) {
				return fmt.Errorf("telemetry: %s: header %d is not name=value with a header's name: write each so, comma separated, the value percent-encoded", k, i+1)
			}
			if _, err := url.PathUnescape(v); err != nil {
				return fmt.Errorf("telemetry: %s: the value of header %d is not percent-encoded as it must be (a %% is written %%25)", k, i+1)
			}
		}
	}
	return nil
}

// exportSent is what the OTLP exporter's requests carry, as getenv
// configures it, for quiet.Err, quiet.InClear and pinned: the headers of
// OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS
// ("key=value" pairs, comma separated, values percent-encoded) and the
// URL the exporter sends to (see endpoint).
func exportSent(getenv func(string) string) *http.Request {
	req := &http.Request{Header: http.Header{}, URL: &url.URL{}}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, pair := range strings.Split(getenv(k), ",") {
			key, v, ok := strings.Cut(pair, "=")
			if !ok {
				continue
			}
			if u, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
				v = u
			}
			req.Header.Add(strings.TrimSpace(key), strings.TrimSpace(v))
		}
	}
	req.URL = endpoint(getenv)
	return req
}

// endpoint is the URL the OTLP exporter sends to, read from getenv as
// the SDK reads it (each value trimmed of spaces): the traces endpoint,
// else the general one, else https://localhost:4318; its scheme http
// for an endpoint written http (or unix), https for any other, and then as
// OTEL_EXPORTER_OTLP_INSECURE, then OTEL_EXPORTER_OTLP_TRACES_INSECURE,
// says when set ("true" is http, any other value https). Its user and
// query are kept, for quiet.Err; the SDK sends neither.
func endpoint(getenv func(string) string) *url.URL {
	u := &url.URL{Scheme: "https", Host: "localhost:4318"}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			if p, err := url.Parse(v); err == nil {
				u = p
				u.Scheme = either(u.Scheme == "http" || u.Scheme == "unix", "http", "https")
				break
			}
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			u.Scheme = either(strings.EqualFold(v, "true"), "http", "https")
		}
	}
	return u
}

// either is yes when b holds, else no.
func either(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// Shutdown sends the spans still waiting and stops the exporter. It is
// safe on a nil Tracing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// ForceFlush sends the spans waiting, for tests and shutdown.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// call is what a box call's context holds for its spans.
type call struct {
	start time.Time
	// admitted is set once the admission span has been ended.
	admitted atomic.Bool
}

type callKey struct{}

// Handler returns next with each request traced in a "box call" span,
// begun as the request arrives and ended when next returns. A nil
// Tracing returns next itself.
func (t *Tracing) Handler(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{start: time.Now()}
		// A new root: the box's traceparent, if any, is not followed.
		ctx, span := t.tracer.Start(context.WithValue(r.Context(), callKey{}, c), "box call",
			trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(c.start))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// admission ends the call's admission span at end, once.
func (t *Tracing) admission(ctx context.Context, end time.Time) {
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil || !c.admitted.CompareAndSwap(false, true) {
		return
	}
	_, span := t.tracer.Start(ctx, "admission", trace.WithTimestamp(c.start))
	span.End(trace.WithTimestamp(end))
}

// Transport returns rt with each upstream call of a traced box call in
// an "upstream" span: its method, the upstream's host and its status;
// never its path, query, headers or body. A nil Tracing returns rt
// itself.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	if t == nil {
		return rt
	}
	return roundTripper{t: t, rt: rt}
}

type roundTripper struct {
	t  *Tracing
	rt http.RoundTripper
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanFromContext(ctx).IsRecording() {
		return rt.rt.RoundTrip(req)
	}
	rt.t.admission(ctx, time.Now())
	_, span := rt.t.tracer.Start(ctx, "upstream", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrMethod.String(req.Method), AttrServer.String(req.URL.Hostname())))
	defer span.End()
	resp, err := rt.rt.RoundTrip(req)
	if err != nil {
		// The error's text may quote the URL: only its kind is kept.
		span.SetStatus(codes.Error, "upstream call failed")
		return resp, err
	}
	span.SetAttributes(AttrStatus.Int(resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, "")
	}
	return resp, err
}

// Call is what a box call's record says, for its spans.
type Call struct {
	Box, Capability, Route, Method, Reason string
	Status                                 int
	Cost                                   int64
}

// Record notes c on ctx's box call span, ends its admission span if no
// upstream call ended it, and begins its "record" span; the returned
// func ends that span. On a nil Tracing, or a ctx with no box call, it
// returns a func that does nothing.
func (t *Tracing) Record(ctx context.Context, c *Call) (end func()) {
	if t == nil || ctx == nil {
		return nop
	}
	root := trace.SpanFromContext(ctx)
	if !root.IsRecording() {
		return nop
	}
	t.admission(ctx, time.Now())
	attrs := []attribute.KeyValue{
		AttrCapability.String(c.Capability), AttrRoute.String(c.Route), AttrMethod.String(c.Method),
		AttrStatus.Int(c.Status),
	}
	if c.Box != "" {
		attrs = append(attrs, AttrBox.String(c.Box))
	}
	if c.Reason != "" {
		attrs = append(attrs, AttrReason.String(c.Reason))
	}
	if c.Cost != 0 {
		attrs = append(attrs, AttrCost.Int64(c.Cost))
	}
	root.SetAttributes(attrs...)
	if c.Status >= 500 {
		root.SetStatus(codes.Error, c.Reason)
	}
	_, span := t.tracer.Start(ctx, "record")
	return func() { span.End() }
}

func nop() {}

// Usage notes one model's usage on ctx's span, for the spend meter as a
// call settles: the model, the payer's kind and the tokens. It costs a
// context lookup when ctx holds no recording span.
func Usage(ctx context.Context, model, payer string, input, output, cacheRead, cacheWrite int64) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrModel.String(model), AttrPayer.String(payer),
		AttrInput.Int64(input), AttrOutput.Int64(output), AttrCacheRead.Int64(cacheRead), AttrCacheWrite.Int64(cacheWrite))
}

// TraceID is the trace id of ctx's span as hex, "" when it has none, for
// the latency histograms' exemplars.
func TraceID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
