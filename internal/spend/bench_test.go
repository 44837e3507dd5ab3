package spend_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/inference"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// BenchmarkStream measures the same Messages stream through the
// /llm/anthropic capability with and without metering, alternating the
// two in every iteration: the time to the first event and to the stream's
// end. It reports each, and metered over unmetered as ttfe-ratio and
// stream-ratio. "budget" meters a box with a budget (a reservation written
// before the call, a settlement after); "no-budget" one without (a read
// before, a settlement after).
//
//	go test -run '^$' -bench BenchmarkStream -benchtime 300x ./internal/spend/
func BenchmarkStream(b *testing.B) {
	events := streamEvents("claude-sonnet-4-5-20250929", 200)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)

	st, err := sqlite.Open(filepath.Join(b.TempDir(), "boxbroker.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, name := range []string{"budget", "no-budget"} {
		if err := st.CreateBox(ctx, store.Box{Name: name, TokenHash: name, CreatedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.SetBudget(ctx, store.Budget{Box: "budget", Limit: 1 << 60, UpdatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	meter, err := spend.New(spend.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	base := proxy.NewTransport(proxy.TransportOptions{})
	plain := inference.New(inference.Config{Upstream: u, Transport: base})
	metered := meter.WrapMessages(inference.New(inference.Config{Upstream: u, Transport: meter.Transport(base)}))
	body := messagesBody("claude-sonnet-4-5", 4096, true)
	var cut [2]int

	for _, box := range []string{"budget", "no-budget"} {
		b.Run(box, func(b *testing.B) {
			front := func(c capability.Capability) *httptest.Server {
				call := &capability.Call{Box: store.Box{Name: box}, Words: []string{"agent"},
					Payer: func(context.Context, *http.Request) (capability.Paid, error) {
						return capability.Paid{Payer: protocol.SharedPayer(), Credential: []byte(key)}, nil
					}}
				return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if err := c.Serve(w, r, call); err != nil {
						protocol.WriteRefusal(w, 502, protocol.TypeAPI, "failed")
					}
				}))
			}
			p, m := front(plain), front(metered)
			defer p.Close()
			defer m.Close()
			client := &http.Client{Transport: proxy.NewTransport(proxy.TransportOptions{})}
			var ttfe, whole [2][]time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j, srv := range []*httptest.Server{p, m} {
					first, all, err := spend.StreamOnce(client, srv.URL+"/llm/anthropic/v1/messages", string(body))
					if err != nil {
						// See BenchmarkObserve: counted and left out.
						cut[j]++
						continue
					}
					ttfe[j] = append(ttfe[j], first)
					whole[j] = append(whole[j], all)
				}
			}
			b.StopTimer()
			spend.ReportMedians(b, "plain", ttfe, whole)
			b.ReportMetric(float64(cut[0]+cut[1]), "cut-streams")
		})
	}
	us, err := st.ListUsage(ctx, "budget", spend.Month(time.Now()))
	if err != nil || len(us) != 1 || us[0].Unmeasured > int64(cut[1]) || us[0].OutputTokens < (us[0].Calls-us[0].Unmeasured)*7*200 {
		b.Errorf("usage after the benchmark = %+v, %v, want every metered stream that was not cut measured", us, err)
	}
}
