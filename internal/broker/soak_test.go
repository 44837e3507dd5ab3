package broker_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// Soak parameters: the upstream's capacity (as the shared credential's
// concurrency limit at the Anthropic API would bound it) and latency, the
// per-box limit, the flood, and the calm box's requests per phase.
const (
	soakUpstreamSlots = 16
	soakLatency       = 10 * time.Millisecond
	soakBoxConcurrent = 8
	soakFlooders      = 64
	soakFloodMax      = 100000 // requests the flood may send in one phase, at most
	soakCalm          = 120    // calm requests per phase (40 against the unbounded broker, where each waits longest)
)

// TestSoak_FloodingBoxDoesNotStarveAnother floods the broker from one box
// — 64 requests at once, retried at once when refused, far beyond its
// --box-concurrent of 8 — while another box makes steady requests, and
// measures the calm box's latency against its latency with no flood, in
// the same run. A second broker with no per-box bound is flooded the same
// way for comparison. The upstream answers in 10 ms and holds 16 calls
// at once, as a shared credential's concurrency limit would.
//
// It asserts only that every calm request succeeded and none was refused,
// and that the flood was refused with 429s; the latencies and their
// ratios are logged.
func TestSoak_FloodingBoxDoesNotStarveAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak of several seconds")
	}
	slots := make(chan struct{}, soakUpstreamSlots)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		// The upstream's latency is the load modelled, over real sockets
		// (which no synctest bubble can hold): a sleep is what it is.
		time.Sleep(soakLatency)
		<-slots
		brokertest.AnthropicStandIn(w, r)
	})
	limited := soakBroker(t, upstream, soakBoxConcurrent)
	baseline := limited.calm(t, soakCalm, nil)
	flooded := limited.calm(t, soakCalm, limited.flood)
	unbounded := soakBroker(t, upstream, -1)
	starved := unbounded.calm(t, soakCalm/3, unbounded.flood)

	for _, p := range []struct {
		name string
		s    soakStats
	}{{"no flood", baseline}, {"flood, --box-concurrent 8", flooded}, {"flood, no per-box bound", starved}} {
		t.Logf("calm box, %-26s p50 %6.1f ms  p90 %6.1f ms  p99 %6.1f ms  (%d requests; flood sent %d, %d refused 429)",
			p.name+":", ms(p.s.p50), ms(p.s.p90), ms(p.s.p99), p.s.n, p.s.flood, p.s.refused)
	}
	t.Logf("calm p50 under flood / without: %.2f with --box-concurrent %d, %.2f with no bound",
		float64(flooded.p50)/float64(baseline.p50), soakBoxConcurrent, float64(starved.p50)/float64(baseline.p50))
	t.Logf("calm p99 under flood / without: %.2f with --box-concurrent %d, %.2f with no bound",
		float64(flooded.p99)/float64(baseline.p99), soakBoxConcurrent, float64(starved.p99)/float64(baseline.p99))
	// Every request, refused or not, is audited through a bounded queue
	// that drops rather than waits; say what the flood cost it.
	for _, line := range strings.Split(string(limited.b.Admin("GET", "/metrics", "", nil).Body), "\n") {
		if strings.HasPrefix(line, "boxbroker_audit_") {
			t.Logf("limited broker: %s", line)
		}
	}
	if flooded.refused == 0 {
		t.Errorf("the flood of %d requests at once was never refused; --box-concurrent %d did not hold", soakFlooders, soakBoxConcurrent)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// soakEnv is a broker with a calm box and a flooding box.
type soakEnv struct {
	b           *brokertest.Broker
	calmToken   string
	floodToken  string
	floodClient *http.Client
}

func soakBroker(t *testing.T, upstream http.Handler, concurrent int) *soakEnv {
	t.Helper()
	b := brokertest.New(t, brokertest.Options{Anthropic: upstream, Config: func(c *server.Config) { c.BoxConcurrent = concurrent }})
	e := &soakEnv{b: b, calmToken: b.AddBox("calm"), floodToken: b.AddBox("flood")}
	b.SetCredential("anthropic", "sk-ant-api03-SOAK")
	b.Report(e.calmToken, brokertest.Entry(protocol.Inference, "agent"))
	b.Report(e.floodToken, brokertest.Entry(protocol.Inference, "agent"))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = soakFlooders
	e.floodClient = &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return e
}

// soakStats are one phase's calm latencies and what the flood did.
type soakStats struct {
	n              int
	p50, p90, p99  time.Duration
	flood, refused int64
}

const soakBody = `{"model":"claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

// floodCount is what a flood has done: requests sent and refused, and
// underway, closed once soakFlooders of its requests have been answered.
type floodCount struct {
	sent, refused, answered atomic.Int64
	underway                chan struct{}
	once                    sync.Once
}

// answer counts one flood request answered.
func (f *floodCount) answer() {
	if f.answered.Add(1) == soakFlooders {
		f.once.Do(func() { close(f.underway) })
	}
}

// calm makes n requests one after another, with flood (if any)
// running meanwhile, and returns their latencies. Every one must succeed.
func (e *soakEnv) calm(t *testing.T, n int, flood func(ctx context.Context, f *floodCount, t *testing.T)) soakStats {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	fc := &floodCount{underway: make(chan struct{})}
	if flood != nil {
		wg.Add(1)
		go func() { defer wg.Done(); flood(ctx, fc, t) }()
		// The calm requests begin once the flood is under way: as many of
		// its requests answered as it sends at once. The broker and the
		// upstream are real sockets, which no synctest bubble can hold, so
		// this is a barrier, bounded in case the flood never gets going.
		select {
		case <-fc.underway:
		case <-time.After(30 * time.Second):
			cancel()
			wg.Wait()
			t.Fatalf("the flood never got under way: %d sent, %d answered", fc.sent.Load(), fc.answered.Load())
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		resp := e.b.Do("POST", "/llm/anthropic/v1/messages", "", []byte(soakBody), http.Header{"X-Api-Key": {e.calmToken}})
		lat = append(lat, time.Since(start))
		if resp.StatusCode != 200 {
			t.Errorf("calm request %d = %d %s, want 200", i, resp.StatusCode, resp.Body)
		}
		time.Sleep(5 * time.Millisecond) // the calm box's pace, part of the load modelled; not a wait for an event
	}
	cancel()
	wg.Wait()
	slices.Sort(lat)
	return soakStats{n: len(lat), p50: lat[len(lat)/2], p90: lat[len(lat)*9/10], p99: lat[(len(lat)*99+99)/100-1], flood: fc.sent.Load(), refused: fc.refused.Load()}
}

// flood sends soakFlooders requests at once, each retried as soon as it
// is answered, refused or not, until ctx ends or soakFloodMax are sent.
// Every refusal must be a 429 with Retry-After and a refusal body.
func (e *soakEnv) flood(ctx context.Context, f *floodCount, t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < soakFlooders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && f.sent.Add(1) <= soakFloodMax {
				req, _ := http.NewRequestWithContext(ctx, "POST", e.b.URL+"/llm/anthropic/v1/messages", strings.NewReader(soakBody))
				req.Header.Set("X-Api-Key", e.floodToken)
				resp, err := e.floodClient.Do(req)
				if err != nil {
					continue // ctx ended
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				f.answer()
				switch resp.StatusCode {
				case 200:
				case http.StatusTooManyRequests:
					f.refused.Add(1)
					if typ, _ := brokertest.Refusal(body); typ != protocol.TypeRateLimit || resp.Header.Get("Retry-After") == "" {
						t.Errorf("flood refusal = %s %q, want a %s refusal with Retry-After", body, resp.Header.Get("Retry-After"), protocol.TypeRateLimit)
					}
				default:
					t.Errorf("flood request = %d %s", resp.StatusCode, body)
				}
			}
		}()
	}
	wg.Wait()
}
