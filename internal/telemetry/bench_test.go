package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// BenchmarkBoxCall is a model call through a whole broker on loopback,
// with tracing off (no OTEL_* variable) and on (exporting to a loopback
// collector that takes and drops every export): the ratio is what
// tracing costs a call.
func BenchmarkBoxCall(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var tracing *telemetry.Tracing
			if on {
				col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/x-protobuf")
				}))
				b.Cleanup(col.Close)
				b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", col.URL+"/v1/traces")
				var err error
				if tracing, err = telemetry.New(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
			}
			br := brokertest.New(b, brokertest.Options{ServerOptions: func(o *server.Options) { o.Tracing = tracing }})
			tok := br.AddBox("alpha")
			br.SetCredential(payer.SharedAnthropic, "sk-ant-api03-bench")
			br.Sync()
			br.Report(tok, brokertest.Entry("inference", "agent"))
			body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":5}`)
			h := http.Header{"X-Api-Key": {tok}, "Content-Type": {"application/json"}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if r := br.Do("POST", "/llm/anthropic/v1/messages", tok, body, h); r.StatusCode != 200 {
					b.Fatalf("status %d %s", r.StatusCode, r.Body)
				}
			}
		})
	}
}
