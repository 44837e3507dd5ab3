package telemetry_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/telemetry"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// TestNew_CollectorRepeatingItsTokenIsNotLogged: a collector that
// answers an export with a status line repeating the bearer token the
// exporter sent (from OTEL_EXPORTER_OTLP_HEADERS) makes Go's transport
// fail with an error quoting that line; the OpenTelemetry SDK hands it to
// the broker's log, which must not receive the token.
func TestNew_CollectorRepeatingItsTokenIsNotLogged(t *testing.T) {
	const token = "collector-token-OTELCANARY-77f1"
	addr := upstreamtest.EchoStatus(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+addr+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20"+token)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	var logs upstreamtest.Buffer
	tracing, err := telemetry.New(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || tracing == nil {
		t.Fatalf("telemetry.New = %v, %v; want a Tracing", tracing, err)
	}
	h := tracing.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	flushErr := tracing.ForceFlush(context.Background())
	_ = tracing.Shutdown(context.Background())
	got := logs.String()
	if flushErr != nil {
		got += flushErr.Error()
	}
	if !strings.Contains(got, "malformed") {
		t.Fatalf("the export's failure was not reported; log:\n%s", got)
	}
	if strings.Contains(got, token) {
		t.Errorf("the collector's token is in the log:\n%s", got)
	}
}

// TestNew_HeadersOverPlainHTTPAreRefused: the collector's headers (its
// API key, as often as not) never cross the network in the clear: an
// OTLP endpoint that is plain http to another machine, with headers set,
// is refused, naming the endpoint and never a header's value; plain http
// to this machine's loopback, or with no headers, is taken.
func TestNew_HeadersOverPlainHTTPAreRefused(t *testing.T) {
	const key = "collector-key-OTELCANARY-3b9d"
	for _, tt := range []struct {
		endpoint, headers string
		refused           bool
	}{
		{"http://otel.example.com:4318/v1/traces", "api-key=" + key, true},
		{"http://10.0.0.7:4318/v1/traces", "Authorization=Bearer%20" + key, true},
		{"https://otel.example.com/v1/traces", "api-key=" + key, false},
		{"http://127.0.0.1:4318/v1/traces", "api-key=" + key, false},
		{"http://localhost:4318/v1/traces", "api-key=" + key, false},
		{"http://otel.example.com:4318/v1/traces", "", false},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tt.endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", tt.headers)
		tracing, err := telemetry.New(context.Background(), nil)
		if (err != nil) != tt.refused {
			t.Errorf("New with %s and headers %q = %v, refused %v; want refused %v", tt.endpoint, tt.headers, err, err != nil, tt.refused)
		}
		if err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("New's refusal quotes a header's value: %v", err)
		}
		_ = tracing.Shutdown(context.Background())
	}
}
