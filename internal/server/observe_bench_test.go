package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// BenchmarkObserve measures what metrics and the audit log add to a
// request: what the broker does with a request's Record (counters,
// histograms, an audit entry journaled and queued) against the baseline of one whole forwarded count_tokens call
// through the broker on loopback (itself observed), measured in the same
// loop. It reports observe/forward, the share of a request's cost that
// observing it takes, and how many audit entries were dropped.
func BenchmarkObserve(b *testing.B) {
	srv, ctx, do := forwardBench(b)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	rec := &broker.Record{At: time.Now(), Method: "POST", Route: "/llm/anthropic/v1/messages/count_tokens", Box: "alpha",
		Capability: "inference", Words: []string{"agent"}, Status: 200, Duration: time.Millisecond, Bytes: 20,
		Upstream: []proxy.Call{{Status: 200, Latency: time.Millisecond}}}
	before := srv.Audit.Dropped()
	var forward, observe time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if s := do("/llm/anthropic/v1/messages/count_tokens", body); s != 200 {
			b.Fatalf("count_tokens = %d", s)
		}
		t1 := time.Now()
		srv.Metrics.Request(rec.Capability, rec.Route, rec.Status, rec.Reason, rec.Duration, "")
		for _, c := range rec.Upstream {
			srv.Metrics.Upstream(rec.Capability, c.Status, c.Latency, "")
		}
		srv.Outbox.RecordCall(nil, rec.AuditEntry())
		forward += t1.Sub(t0)
		observe += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(forward.Nanoseconds())/float64(b.N), "forward-ns/op")
	b.ReportMetric(float64(observe.Nanoseconds())/float64(b.N), "observe-ns/op")
	b.ReportMetric(float64(observe)/float64(forward), "observe/forward")
	b.ReportMetric(float64(srv.Audit.Dropped()-before), "audit-dropped")
	if err := srv.Audit.Sync(ctx); err != nil {
		b.Fatal(err)
	}
}

// forwardBench starts a broker on loopback whose upstream answers
// count_tokens at once, with a box alpha that reported inference/agent
// and a shared credential, for benchmarks that weigh a part of a call
// against one whole forwarded call. do posts body to path with alpha's
// token and returns the status. Everything stops when b ends.
func forwardBench(b *testing.B) (srv *Server, ctx context.Context, do func(path string, body []byte) int) {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":12}`)
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, Config{DataDir: b.TempDir(), AnthropicURL: u, LogLevel: "error"},
		Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		b.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { srv.Run(ctx); close(ran) }()
	b.Cleanup(func() {
		cancel()
		<-ran
		srv.Close()
	})
	tok, _ := token.NewBox()
	if err := srv.Store.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: token.Hash(tok), CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		b.Fatal(err)
	}
	sealed, _ := srv.Keyring.Seal([]byte("sk-ant-api03-bench"), payer.AD("anthropic"))
	if err := srv.Store.SetCredential(ctx, store.Credential{ID: "anthropic", Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler)
	b.Cleanup(hs.Close)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	do = func(path string, body []byte) int {
		req, _ := http.NewRequest("POST", hs.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := do(protocol.RouteDeclaration, []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`)); s != 200 {
		b.Fatalf("report = %d", s)
	}
	return srv, ctx, do
}
