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
