package spend_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
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
	metered := meter.Wrap(inference.New(inference.Config{Upstream: u, Transport: meter.Transport(base)}))
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

// rewindable is a request body that can be read again from its start,
// so that a benchmark's iterations allocate none of their own.
type rewindable struct{ bytes.Reader }

func (*rewindable) Close() error { return nil }

// drain is a capability that reads its request's body to the end, as the
// proxy does when it forwards it, and answers nothing.
// drain is the Messages capability, metered as it is, but serving a call
// by reading its body.
type drain struct{ *inference.Capability }

func (drain) Serve(w http.ResponseWriter, r *http.Request, _ *capability.Call) error {
	_, err := io.Copy(io.Discard, r.Body)
	return err
}

// sizedBody is a Messages request of exactly n bytes.
func sizedBody(tb testing.TB, n int) []byte {
	tb.Helper()
	body := messagesBody("claude-sonnet-4-5", 1024, false)
	pad := n - len(body)
	if pad < 0 {
		tb.Fatalf("a Messages body of %d bytes is too small", n)
	}
	body = bytes.Replace(body, []byte("Say hello."), []byte("Say hello."+strings.Repeat("x", pad)), 1)
	if len(body) != n {
		tb.Fatalf("sizedBody(%d) = %d bytes", n, len(body))
	}
	return body
}

// benchmarkPrepare serves a Messages call with body, of a box with a
// budget or without, through the metered capability to one that only
// reads the body: what metering costs a call before its answer.
func benchmarkPrepare(b *testing.B, body []byte, budgeted bool) {
	m, err := spend.New(spend.Config{Store: nopStore{},
		Budgeted: func(context.Context, string, time.Time) (bool, error) { return budgeted, nil }})
	if err != nil {
		b.Fatal(err)
	}
	c := m.Wrap(drain{inference.New(inference.Config{Upstream: &url.URL{Scheme: "http", Host: "upstream.invalid"}})})
	call := &capability.Call{Box: store.Box{Name: "salad"}, Words: []string{"agent"},
		Payer: func(context.Context, *http.Request) (capability.Paid, error) {
			return capability.Paid{Payer: protocol.SharedPayer(), Credential: []byte(key)}, nil
		}}
	req := httptest.NewRequest("POST", protocol.PrefixAnthropic+"/v1/messages", nil)
	req.ContentLength = int64(len(body))
	rb := &rewindable{}
	req.Body = rb
	w := httptest.NewRecorder()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rb.Reset(body)
		if err := c.Serve(w, req, call); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepare_Small: a 146-byte Messages call of a box without a
// budget.
//
//	go test -run '^$' -bench BenchmarkPrepare -benchmem ./internal/spend/
func BenchmarkPrepare_Small(b *testing.B) { benchmarkPrepare(b, sizedBody(b, 146), false) }

// BenchmarkPrepare_1MiB: a Messages call of a box without a budget, of
// MaxRead bytes, the largest the broker reads before forwarding.
func BenchmarkPrepare_1MiB(b *testing.B) { benchmarkPrepare(b, sizedBody(b, inference.MaxRead), false) }

// BenchmarkPrepare_Budgeted: a 146-byte Messages call of a box with a
// budget, whose body is read before it is forwarded, and whose bound is
// reserved (in a store that only counts) and released.
func BenchmarkPrepare_Budgeted(b *testing.B) { benchmarkPrepare(b, sizedBody(b, 146), true) }

// BenchmarkObserveJSON reads the usage of a 300-byte JSON answer as it
// passes, and records it when the answer is closed.
//
//	go test -run '^$' -bench BenchmarkObserveJSON -benchmem ./internal/spend/
func BenchmarkObserveJSON(b *testing.B) {
	answer := []byte(`{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
		`"content":[{"type":"text","text":"Hello! How can I help you today?"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":18}}`)
	rb := &rewindable{}
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rb.Reset(answer)
		if model, measured := spend.ObserveJSON(rb, buf); !measured || model != "claude-sonnet-4-5-20250929" {
			b.Fatalf("ObserveJSON = %q, %v, want sonnet, measured", model, measured)
		}
	}
}

// nopStore is a store.Spend that reserves every bound and settles
// nothing.
type nopStore struct{ store.Spend }

func (nopStore) Reserve(context.Context, store.Reservation) (int64, error) { return 1, nil }
func (nopStore) Settle(context.Context, store.Settlement) error            { return nil }
