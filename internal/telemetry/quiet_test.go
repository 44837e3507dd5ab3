package telemetry_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"go.opentelemetry.io/otel"

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
	got := exportOne(t)
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
	tests := []struct {
		endpoint, headers, insecure string
		refused                     bool
	}{
		{"http://otel.example.com:4318/v1/traces", "api-key=" + key, "", true},
		{"http://10.0.0.7:4318/v1/traces", "Authorization=Bearer%20" + key, "", true},
		{"https://otel.example.com/v1/traces", "api-key=" + key, "", false},
		{"http://127.0.0.1:4318/v1/traces", "api-key=" + key, "", false},
		{"http://localhost:4318/v1/traces", "api-key=" + key, "", false},
		{"http://otel.example.com:4318/v1/traces", "", "", false},
		// The SDK trims the endpoint of spaces, and sends to an https
		// endpoint over plain http when OTEL_EXPORTER_OTLP_INSECURE is
		// true: judged by where the export goes.
		{" http://otel.example.com:4318/v1/traces", "api-key=" + key, "", true},
		{"https://otel.example.com/v1/traces", "api-key=" + key, "true", true},
		{"https://otel.example.com/v1/traces", "api-key=" + key, "TRUE", true},
		{"http://otel.example.com:4318/v1/traces", "api-key=" + key, "false", false},
	}
	for _, tt := range tests {
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tt.endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", tt.headers)
		t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", tt.insecure)
		tracing, err := telemetry.New(context.Background(), nil)
		if (err != nil) != tt.refused {
			t.Errorf("New with %q, headers %q and insecure %q = %v, refused %v; want refused %v", tt.endpoint, tt.headers, tt.insecure, err, err != nil, tt.refused)
		}
		if err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("New's refusal quotes a header's value: %v", err)
		}
		_ = tracing.Shutdown(context.Background())
	}
}

// TestNew_CollectorRedirectIsNotFollowed: a collector (or whoever answers
// at its address) answering an export with a 307 to another address, a
// host of its own on plain http or an address inside the operator's
// network, would have the exporter send the export again there, with the
// collector's headers (OTEL_EXPORTER_OTLP_HEADERS: an API key that is no
// Authorization header goes on to any host): the redirect is not
// followed, and the other address receives nothing.
func TestNew_CollectorRedirectIsNotFollowed(t *testing.T) {
	const key = "collector-key-OTELCANARY-9e04"
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.URL.Path+" api-key="+r.Header.Get("Api-Key"))
		mu.Unlock()
	}))
	t.Cleanup(other.Close)
	// The collector's own name for the other address: "localhost", so
	// the redirect leaves the configured host (127.0.0.1).
	to := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/v1/traces"
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.URL+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key="+key)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	logs := exportOne(t)
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) > 0 {
		t.Errorf("the export was sent on to the address the collector named: %q", elsewhere)
	}
	if strings.Contains(logs, key) {
		t.Errorf("the collector's key is in the log:\n%s", logs)
	}
}

// TestNew_CollectorRefusalOfMegabytesIsCutInTheLog: a collector refusing
// each export with a body of megabytes, which the SDK quotes whole in
// the error it hands to the broker's log (up to the 4 MiB it reads),
// writes a line of at most a few KiB for it.
func TestNew_CollectorRefusalOfMegabytesIsCutInTheLog(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(strings.Repeat("refused ", 1<<17))) // 1 MiB
	}))
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.URL+"/v1/traces")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	got := exportOne(t)
	if !strings.Contains(got, "400") {
		t.Fatalf("the refused export was not logged; log:\n%.2000s", got)
	}
	if len(got) > 16<<10 {
		t.Errorf("the log holds %d bytes for one refused export, want a few KiB", len(got))
	}
}

// TestNew_MalformedHeaderIsRefusedNotLogged: a header in
// OTEL_EXPORTER_OTLP_HEADERS written as HTTP writes it ("api-key: …",
// no "=", or one whose "=" ends a padded key, leaving no header name
// before it), or with a value whose percent-escapes do not decode, is one
// the SDK cannot read, and it logs the pair, key and all, through its own
// logger (the process's stderr by default, past the broker's log).
// serve is refused, naming the variable, never the value; the SDK logs
// nothing of it.
func TestNew_MalformedHeaderIsRefusedNotLogged(t *testing.T) {
	const key = "collector-key-OTELCANARY-51aa"
	var sdkLog upstreamtest.Buffer
	otel.SetLogger(funcr.New(func(prefix, args string) { _, _ = sdkLog.Write([]byte(prefix + " " + args + "\n")) }, funcr.Options{}))
	t.Cleanup(func() { otel.SetLogger(funcr.New(func(string, string) {}, funcr.Options{})) })
	tests := []struct {
		v, headers, endpoint string
	}{
		{"OTEL_EXPORTER_OTLP_HEADERS", "api-key: " + key, ""},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=a,Authorization: Bearer " + key, ""},
		{"OTEL_EXPORTER_OTLP_HEADERS", "api-key=" + key + "%zz", ""},
		// A padded key written as HTTP writes it: the "=" is its padding,
		// and what comes before it is no header name.
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer " + key + "==", ""},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", "https://user:" + key + "%zz@collector.example/v1/traces"},
	}
	for _, tt := range tests {
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
		if tt.headers != "" {
			t.Setenv(tt.v, tt.headers)
		} else {
			t.Setenv(tt.v, tt.endpoint)
		}
		tracing, err := telemetry.New(context.Background(), nil)
		_ = tracing.Shutdown(context.Background())
		if err == nil || !strings.Contains(err.Error(), tt.v) {
			t.Errorf("New with %s malformed = %v, want it refused naming %s", tt.v, err, tt.v)
		}
		if err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("New's refusal quotes the value: %v", err)
		}
	}
	if strings.Contains(sdkLog.String(), key) {
		t.Errorf("the SDK logged a header's value:\n%s", sdkLog.String())
	}
}

// exportOne traces one call with the Tracing the OTEL_* variables
// configure, flushes it and shuts it down, and returns what the broker's
// log received and the flush's error, if any.
func exportOne(t *testing.T) string {
	t.Helper()
	var logs upstreamtest.Buffer
	tracing, err := telemetry.New(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || tracing == nil {
		t.Fatalf("telemetry.New = %v, %v; want a Tracing", tracing, err)
	}
	h := tracing.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	flushErr := tracing.ForceFlush(context.Background())
	_ = tracing.Shutdown(context.Background())
	if flushErr != nil {
		return logs.String() + flushErr.Error()
	}
	return logs.String()
}
