package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// receiver is an OTLP/HTTP traces receiver on loopback: it keeps every
// export's raw bytes and its decoded spans.
type receiver struct {
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, 16<<20)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.raw = append(rc.raw, b)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (rc *receiver) snapshot() ([]*tracepb.Span, []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...), bytes.Join(rc.raw, nil)
}

func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = anyString(kv.Value)
	}
	return m
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	}
	return v.String()
}

// TestTraces_BoxCalls drives box calls through the broker — a model call
// with the shared credential, an egress call with a secret, a refusal —
// with an OTLP/HTTP receiver on loopback configured by the standard
// OTEL_* variables, and checks each call's trace: a "box call" span
// with admission, upstream (for a model call) and record children, the
// attributes named in package telemetry, and that no box token,
// credential or secret value is anywhere in the bytes exported.
func TestTraces_BoxCalls(t *testing.T) {
	const (
		credential = "sk-ant-api03-OTELCANARY-CREDENTIAL-5e1d"
		secretVal  = "sv-OTELCANARY-SECRET-0c9a"
	)
	rc := &receiver{}
	recv := httptest.NewServer(rc)
	t.Cleanup(recv.Close) // after the broker's own cleanup, which flushes
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", recv.URL+"/v1/traces")
	t.Setenv("OTEL_SERVICE_NAME", "boxbroker-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	tracing, err := telemetry.New(context.Background(), nil)
	if err != nil || tracing == nil {
		t.Fatalf("telemetry.New = %v, %v; want a Tracing", tracing, err)
	}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer echo.Close()
	b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Tracing = tracing }})
	tok := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, credential)
	b.SetSecret("alpha", "CANARY", echo.URL, secretVal)
	b.Sync()
	b.Report(tok, brokertest.Entry("inference", "agent"), brokertest.Entry("egress", "CANARY"))

	calls := []struct {
		name, method, path, token, body string
		status                          int
	}{
		{"model", "POST", "/llm/anthropic/v1/messages", tok, `{"model":"claude-otel-test","max_tokens":5}`, 200},
		{"egress", "GET", "/egress/CANARY/v1/thing?key=" + secretVal, tok, ``, 200},
		{"refused", "POST", "/llm/anthropic/v1/messages", tok + "x", `{"model":"m"}`, 403},
	}
	for _, c := range calls {
		h := http.Header{"X-Api-Key": {c.token}, "Content-Type": {"application/json"}}
		if strings.HasPrefix(c.path, "/egress") {
			h = http.Header{"Authorization": {"Bearer " + c.token}}
		}
		r := b.Do(c.method, c.path, c.token, []byte(c.body), h)
		if r.StatusCode != c.status {
			t.Fatalf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, r.StatusCode, r.Body, c.status)
		}
	}

	// The box calls' spans end as their handlers return, just after the
	// answers: flush until every call's root span (and the model call's
	// usage) has arrived, a bounded number of times.
	var spans []*tracepb.Span
	var raw []byte
	roots := func() []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range spans {
			if s.Name == "box call" {
				out = append(out, s)
			}
		}
		return out
	}
	for i := 0; i < 200; i++ {
		if err := tracing.ForceFlush(context.Background()); err != nil {
			t.Fatalf("ForceFlush: %v", err)
		}
		spans, raw = rc.snapshot()
		if len(roots()) >= len(calls)+1 { // and the declaration report's
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	rs := roots()
	if len(rs) != len(calls)+1 {
		t.Fatalf("got %d box call spans, want %d (spans: %d)", len(rs), len(calls)+1, len(spans))
	}
	children := map[string][]string{} // root span id → child names
	for _, s := range spans {
		if s.Name != "box call" {
			children[string(s.ParentSpanId)] = append(children[string(s.ParentSpanId)], s.Name)
		}
	}
	byRoute := map[string]*tracepb.Span{}
	for _, r := range rs {
		a := attrs(r)
		key := a["http.route"] + " " + a["http.response.status_code"]
		byRoute[key] = r
	}
	tests := []struct {
		key      string
		want     map[string]string
		children []string
	}{
		{"/llm/anthropic/v1/messages 200", map[string]string{
			"boxbroker.box": "alpha", "boxbroker.capability": "inference", "http.request.method": "POST",
			"gen_ai.request.model": "claude-otel-test", "boxbroker.payer.kind": "shared",
			"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "6",
		}, []string{"admission", "upstream", "record"}},
		{"/egress/* 200", map[string]string{"boxbroker.box": "alpha", "boxbroker.capability": "egress"}, []string{"admission", "upstream", "record"}},
		{"/llm/anthropic/v1/messages 403", map[string]string{"boxbroker.capability": "inference", "boxbroker.reason": "token"}, []string{"admission", "record"}},
	}
	for _, tt := range tests {
		r := byRoute[tt.key]
		if r == nil {
			var keys []string
			for k := range byRoute {
				keys = append(keys, k)
			}
			t.Errorf("no box call span for %q; have %q", tt.key, keys)
			continue
		}
		a := attrs(r)
		for k, v := range tt.want {
			if a[k] != v {
				t.Errorf("%s: attribute %s = %q, want %q (all: %v)", tt.key, k, a[k], v, a)
			}
		}
		got := children[string(r.SpanId)]
		for _, c := range tt.children {
			found := false
			for _, g := range got {
				found = found || g == c
			}
			if !found {
				t.Errorf("%s: children %q lack %q", tt.key, got, c)
			}
		}
	}
	// The latency histogram's buckets carry trace ids as exemplars, each
	// of a box call exported.
	traceIDs := map[string]bool{}
	for _, r := range rs {
		traceIDs[hex.EncodeToString(r.TraceId)] = true
	}
	mfs, err := b.Server.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exemplars := 0
	for _, mf := range mfs {
		if mf.GetName() != "boxbroker_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, bk := range m.GetHistogram().GetBucket() {
				for _, lp := range bk.GetExemplar().GetLabel() {
					if lp.GetName() == "trace_id" {
						exemplars++
						if !traceIDs[lp.GetValue()] {
							t.Errorf("exemplar trace_id %s is no box call's trace", lp.GetValue())
						}
					}
				}
			}
		}
	}
	if exemplars == 0 {
		t.Error("boxbroker_request_duration_seconds has no trace_id exemplar")
	}
	// A scraper asking for OpenMetrics is served them.
	req, _ := http.NewRequest("GET", b.AdminURL+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := b.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	om, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(om, []byte(`boxbroker_request_duration_seconds_bucket`)) || !bytes.Contains(om, []byte(`# {trace_id="`)) {
		t.Errorf("GET /metrics as OpenMetrics = %d, without the request histogram's exemplars", resp.StatusCode)
	}
	for _, v := range []string{tok, credential, secretVal, "OTELCANARY"} {
		if bytes.Contains(raw, []byte(v)) {
			t.Errorf("exported span bytes contain %q", v)
		}
	}
	for _, s := range spans {
		for k, v := range attrs(s) {
			if strings.Contains(v, "?") || strings.Contains(v, "/v1/thing") {
				t.Errorf("span %s attribute %s = %q: a path or query", s.Name, k, v)
			}
		}
	}
}

// TestEnabled checks which OTEL_* settings turn tracing on.
func TestEnabled(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"otlp exporter", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{"disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := telemetry.Enabled(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("Enabled(%v) = %v, want %v", tt.env, got, tt.want)
			}
		})
	}
}

// TestNew_Unsupported checks that a traces exporter or protocol this
// package does not serve stops New with a clear error.
func TestNew_Unsupported(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if tr, err := telemetry.New(context.Background(), nil); err == nil || tr != nil {
		t.Fatalf("New with OTEL_EXPORTER_OTLP_PROTOCOL=grpc = %v, %v; want an error", tr, err)
	}
}

// TestNew_UnsupportedWithoutEndpoint: an exporter or protocol this
// package does not serve stops New even with no OTLP endpoint set, as
// docs/telemetry.md says ("any other value stops serve"): an operator who
// asks for zipkin traces is told so, not left with none and no word;
// OTEL_SDK_DISABLED=true still turns tracing off whatever else is set.
func TestNew_UnsupportedWithoutEndpoint(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr bool
	}{
		{"zipkin exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, true},
		{"grpc protocol, otlp exporter", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"grpc traces protocol, otlp exporter", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"grpc protocol, traces off", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{"zipkin, SDK disabled", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_SDK_DISABLED": "true"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(k, tt.env[k])
			}
			tr, err := telemetry.New(context.Background(), nil)
			if tr != nil {
				t.Errorf("New with %v traces; want none", tt.env)
			}
			if gotErr := errors.Is(err, telemetry.ErrUnsupported); gotErr != tt.wantErr {
				t.Errorf("New with %v = %v; want an ErrUnsupported error: %v", tt.env, err, tt.wantErr)
			}
		})
	}
}

// TestNil checks that a nil Tracing is off: it wraps nothing.
func TestNil(t *testing.T) {
	var tr *telemetry.Tracing
	h := http.NotFoundHandler()
	if got := tr.Handler(h); got == nil {
		t.Fatal("nil Tracing's Handler is nil")
	}
	tr.Record(context.Background(), &telemetry.Call{})()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
