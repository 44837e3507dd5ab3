package spend_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/inference"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

const key = "sk-ant-api03-SPENDTESTKEY"

// messagesBody is a small Messages request.
func messagesBody(model string, maxTokens int, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": model, "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": "Say hello."}},
	})
	return b
}

// estimateMessages is the estimate of a Messages call with body, of n
// bytes, whose output is bounded by maxTokens when body does not.
func estimateMessages(body []byte, n, maxTokens int64) spend.Estimate {
	r, _ := http.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
	return spend.EstimateOf(inference.New(inference.Config{}).Estimate(r, body), n, maxTokens)
}

// newBroker starts a broker with opt, a box "salad" that declared agent
// and decide, and the shared credential; it returns the box's token.
func newBroker(t *testing.T, opt brokertest.Options) (*brokertest.Broker, string) {
	t.Helper()
	b := brokertest.New(t, opt)
	token := b.AddBox("salad")
	b.Report(token, brokertest.Entry("inference", "agent", "decide"))
	b.SetCredential("anthropic", key)
	return b, token
}

func post(b *brokertest.Broker, token string, body []byte) brokertest.Response {
	return b.Do("POST", "/llm/anthropic/v1/messages", token, body, http.Header{"Content-Type": {"application/json"}})
}

// settled waits until the box's reservations in month are all released
// (a call settles just after its answer's last byte) and returns its
// tallies. It fails the test if they never are.
func settled(t *testing.T, st store.Store, box, month string) []store.Tally {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ts, err := st.Tallies(context.Background(), box, month)
		if err != nil {
			t.Fatalf("Tallies(%s, %s) = %v", box, month, err)
		}
		held := int64(0)
		for _, tl := range ts {
			held += tl.Reserved
		}
		if held == 0 {
			return ts
		}
		if time.Now().After(deadline) {
			t.Fatalf("Tallies(%s, %s) = %+v: reservations never released", box, month, ts)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func boxSpent(ts []store.Tally) int64 {
	for _, tl := range ts {
		if tl.Principal == "" {
			return tl.Spent
		}
	}
	return 0
}

// TestBudget_ConcurrentRequestsNeverOverspend fires 50 Messages calls at
// once at a box whose budget holds about 10 of them. The stand-in holds
// every call it receives until each of the 50 has either reached it or
// been refused, so all that are let through are in flight together.
func TestBudget_ConcurrentRequestsNeverOverspend(t *testing.T) {
	const n, fits, maxTokens = 50, 10, 1000
	tests := []struct {
		name string
		// inputTokens is what the stand-in reports: within the bound, or
		// (a request the estimate undercounts) far past it.
		inputTokens int64
	}{
		{"within the bound", 500},
		{"past the bound", 20_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var arrived, refused atomic.Int64
			gate := make(chan struct{})
			var once sync.Once
			release := func() {
				if arrived.Load()+refused.Load() == n {
					once.Do(func() { close(gate) })
				}
			}
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var req struct {
					Model     string `json:"model"`
					MaxTokens int64  `json:"max_tokens"`
				}
				_ = json.Unmarshal(body, &req)
				arrived.Add(1)
				release()
				<-gate
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hi"}],"stop_reason":"max_tokens","usage":{"input_tokens":%d,"output_tokens":%d}}`,
					req.Model+"-20250929", tt.inputTokens, req.MaxTokens)
			})
			b, token := newBroker(t, brokertest.Options{Anthropic: up})
			body := messagesBody("claude-sonnet-4-5", maxTokens, false)
			bound := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000))
			limit := fits*bound + bound/2
			month := spend.Month(time.Now())
			if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: limit, UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			price, _ := b.Server.Meter.Prices().Lookup("claude-sonnet-4-5")
			actual := price.Cost(spend.Tokens{Input: tt.inputTokens, Output: maxTokens})

			var wg sync.WaitGroup
			var mu sync.Mutex
			statuses := map[int]int{}
			var messages []string
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp := post(b, token, body)
					if resp.StatusCode != 200 {
						refused.Add(1)
						release()
					}
					mu.Lock()
					defer mu.Unlock()
					statuses[resp.StatusCode]++
					if resp.StatusCode != 200 {
						typ, msg := brokertest.Refusal(resp.Body)
						messages = append(messages, typ+": "+msg)
					}
				}()
			}
			wg.Wait()

			if statuses[200] != fits || statuses[403] != n-fits {
				t.Errorf("answers = %v, want %d × 200 and %d × 403", statuses, fits, n-fits)
			}
			want := fmt.Sprintf("permission_error: This box's monthly budget of %s for %s is spent:", spend.FormatUSD(limit), month)
			resets := "It resets on " + spend.Resets(month).Format("2006-01-02") + " at 00:00 UTC"
			for _, m := range messages {
				if !strings.HasPrefix(m, want) || !strings.Contains(m, resets) {
					t.Errorf("refusal = %q, want it to begin %q and say %q", m, want, resets)
					break
				}
			}
			if got := int(arrived.Load()); got != fits {
				t.Errorf("upstream received %d calls, want %d", got, fits)
			}
			spent := boxSpent(settled(t, b.Server.Store, "salad", month))
			if spent != fits*actual {
				t.Errorf("spent = %d, want %d calls × %d", spent, fits, actual)
			}
			// Never past the budget plus what was in flight when it was reached.
			if spent > limit+fits*max(actual-bound, 0) {
				t.Errorf("spent %d, past the budget %d plus the in-flight overrun %d", spent, limit, fits*max(actual-bound, 0))
			}
			if actual <= bound && spent > limit {
				t.Errorf("spent %d past the budget %d though every call cost less than its bound", spent, limit)
			}
			us := brokertest.Usage(t, b.Server.Store, "salad", month, fits)
			if len(us) != 1 || us[0].Calls != fits || us[0].Cost != fits*actual || us[0].Model != "claude-sonnet-4-5-20250929" ||
				us[0].InputTokens != fits*tt.inputTokens || us[0].OutputTokens != fits*maxTokens || us[0].PayerKind != protocol.PayerShared {
				t.Errorf("usage = %+v, want one sonnet row of %d shared calls costing %d", us, fits, fits*actual)
			}
			if tt.inputTokens > 10_000 {
				// Overrun: the next call is refused at once.
				resp := post(b, token, body)
				if resp.StatusCode != 403 {
					t.Errorf("a call after the budget was overrun = %d, want 403", resp.StatusCode)
				}
			}
		})
	}
}

// TestSpend_StreamUsageFromEventsFirstEventNotHeld shows the first event of
// a stream reaches the box while the stand-in still holds the rest back,
// and that the usage is read from the events as they pass.
func TestSpend_StreamUsageFromEventsFirstEventNotHeld(t *testing.T) {
	more := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		evs := streamEvents("claude-haiku-4-5-20251001", 3)
		_, _ = io.WriteString(w, evs[0])
		w.(http.Flusher).Flush()
		select {
		case <-more:
		case <-r.Context().Done():
			return
		}
		for _, ev := range evs[1:] {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	})
	b, token := newBroker(t, brokertest.Options{Anthropic: up})
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: 5_000_000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", bytes.NewReader(messagesBody("claude-haiku-4-5", 4096, true)))
	req.Header.Set("X-Api-Key", token)
	req.Header.Set("Accept-Encoding", "gzip")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("POST stream: %v (was the first event held back?)", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := readEvent(br)
	if err != nil || !strings.Contains(first, "message_start") {
		t.Fatalf("first event = %q, %v, want message_start before the stand-in sends more", first, err)
	}
	close(more)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("rest of stream = %q, %v", rest, err)
	}
	month := spend.Month(time.Now())
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 1)
	haiku, _ := b.Server.Meter.Prices().Lookup("claude-haiku-4-5")
	want := store.Usage{Box: "salad", Month: month, PayerKind: "shared", Model: "claude-haiku-4-5-20251001", Calls: 1,
		InputTokens: 25, OutputTokens: 3 * 7, CacheWriteTokens: 100, CacheReadTokens: 400,
		Cost: haiku.Cost(spend.Tokens{Input: 25, Output: 21, CacheWrite: 100, CacheWrite1h: 40, CacheRead: 400})}
	if len(us) != 1 || us[0] != want {
		t.Errorf("usage = %+v, want %+v", us, want)
	}
	if spent := boxSpent(settled(t, b.Server.Store, "salad", month)); spent != want.Cost {
		t.Errorf("spent = %d, want the measured %d", spent, want.Cost)
	}
}

// streamEvents is a Messages stream with deltas content deltas, each
// adding 7 output tokens.
func streamEvents(model string, deltas int) []string {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	out := []string{ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"`+model+
		`","content":[],"stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":400,`+
		`"cache_creation":{"ephemeral_5m_input_tokens":60,"ephemeral_1h_input_tokens":40},"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		ev("ping", `{"type": "ping"}`)}
	for i := 0; i < deltas; i++ {
		out = append(out, ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, hello, hello. "}}`))
	}
	return append(out,
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, 7*deltas)),
		ev("message_stop", `{"type":"message_stop"}`))
}

// readEvent reads one event: lines up to a blank one.
func readEvent(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\n" || line == "\r\n" {
			return b.String(), nil
		}
	}
}

// TestSpend_StreamCutOffChargedAtBound: a box that goes away mid-stream is
// charged the call's bound, as its cost is not known, and its reservation
// is released.
func TestSpend_StreamCutOffChargedAtBound(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, streamEvents("claude-haiku-4-5", 1)[0])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	b, token := newBroker(t, brokertest.Options{Anthropic: up})
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: 5_000_000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	body := messagesBody("claude-haiku-4-5", 2000, true)
	req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", bytes.NewReader(body))
	req.Header.Set("X-Api-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if first, err := readEvent(bufio.NewReader(resp.Body)); err != nil || !strings.Contains(first, "message_start") {
		t.Fatalf("first event = %q, %v", first, err)
	}
	resp.Body.Close()
	month := spend.Month(time.Now())
	bound := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000))
	if spent := boxSpent(settled(t, b.Server.Store, "salad", month)); spent != bound {
		t.Errorf("spent = %d, want the bound %d", spent, bound)
	}
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 1)
	if len(us) != 1 || us[0].Unmeasured != 1 || us[0].Cost != 0 || us[0].InputTokens != 25 {
		t.Errorf("usage = %+v, want one unmeasured call, costing nothing measured, input 25", us)
	}
}

// TestSpend_UnpricedModelIsChargedAsTheDearestKnown: a model neither in
// the table nor of a family in it is recorded as unpriced, never as
// costing zero, and charged its tokens at the dearest known model's price
// (not its whole reservation, which held a $5 budget's every call
// back); the reservation is at that price too, and bounds the charge.
func TestSpend_UnpricedModelIsChargedAsTheDearestKnown(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{})
	body := messagesBody("claude-mystery-9", 300, false)
	if resp := post(b, token, body); resp.StatusCode != 200 {
		t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
	}
	month := spend.Month(time.Now())
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 1)
	want := store.Usage{Box: "salad", Month: month, PayerKind: "shared", Model: "claude-mystery-9", Calls: 1, Unpriced: 1, InputTokens: 12, OutputTokens: 6}
	if len(us) != 1 || us[0] != want {
		t.Errorf("usage = %+v, want %+v", us, want)
	}
	prices := b.Server.Meter.Prices()
	dearest, ok := prices.Lookup(prices.UnpricedAs())
	if !ok || prices.UnpricedAs() != "claude-opus-4-1" {
		t.Fatalf("UnpricedAs() = %q, want claude-opus-4-1, the dearest in the table", prices.UnpricedAs())
	}
	charge := dearest.Cost(spend.Tokens{Input: 12, Output: 6})
	bound := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000))
	if spent := boxSpent(settled(t, b.Server.Store, "salad", month)); spent != charge || charge == 0 || charge > bound {
		t.Errorf("spent = %d, want %d (its tokens at claude-opus-4-1's price), at most the bound %d", spent, charge, bound)
	}
	// The bound is the dearest model's: dearer than the same call on any model in the table.
	for _, m := range prices.Models() {
		if other := b.Server.Meter.Bound(estimateMessages(messagesBody(m, 300, false), int64(len(body)), 64000)); other > bound {
			t.Errorf("Bound(%s) = %d, over the unpriced bound %d", m, other, bound)
		}
	}
	got := b.Server.Meter.Unpriced()
	if len(got) != 1 || got[0].Model != "claude-mystery-9" || got[0].As != "claude-opus-4-1" || got[0].Match != spend.Unpriced || got[0].Calls != 1 {
		t.Errorf("Unpriced() = %+v, want claude-mystery-9 charged as claude-opus-4-1, 1 call", got)
	}
}

// TestSpend_PriceFileOverrides: --prices replaces a default.
func TestSpend_PriceFileOverrides(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"claude-sonnet-4-5": {"input": 100, "output": 1000}, "claude-haiku-4-5": null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b, token := newBroker(t, brokertest.Options{Config: func(c *server.Config) { c.Prices = file }})
	for _, model := range []string{"claude-sonnet-4-5", "claude-haiku-4-5"} {
		if resp := post(b, token, messagesBody(model, 100, false)); resp.StatusCode != 200 {
			t.Fatalf("POST %s = %d %s", model, resp.StatusCode, resp.Body)
		}
	}
	month := spend.Month(time.Now())
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 2)
	want := []store.Usage{
		{Box: "salad", Month: month, PayerKind: "shared", Model: "claude-haiku-4-5", Calls: 1, Unpriced: 1, InputTokens: 12, OutputTokens: 6},
		{Box: "salad", Month: month, PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 1, InputTokens: 12, OutputTokens: 6, Cost: 12*100 + 6*1000},
	}
	if len(us) != 2 || us[0] != want[0] || us[1] != want[1] {
		t.Errorf("usage = %+v, want %+v", us, want)
	}
}

func TestServer_BadPriceFileRefusesToStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"claude-sonnet-4-5": {"input": -1, "output": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{DataDir: t.TempDir(), Prices: file}
	srv, err := server.New(context.Background(), cfg, server.Options{})
	if err == nil {
		srv.Close()
		t.Fatal("server.New with a bad price file = nil, want an error")
	}
	if !strings.Contains(err.Error(), "claude-sonnet-4-5: input must be") {
		t.Errorf("server.New error = %v, want it to name the bad price", err)
	}
}

// TestBudget_MonthRollover: a budget spent on the last day of a month
// lets calls through again from the first of the next, UTC.
func TestBudget_MonthRollover(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 10, 31, 23, 59, 30, 0, time.UTC))
	b, token := newBroker(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.SpendNow = clk.Now }})
	body := messagesBody("claude-sonnet-4-5", 500, false)
	bound := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000))
	// Room for one call's bound: once it has cost anything, no more.
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: bound, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if resp := post(b, token, body); resp.StatusCode != 200 {
		t.Fatalf("first call = %d %s", resp.StatusCode, resp.Body)
	}
	settled(t, b.Server.Store, "salad", "2026-10")
	resp := post(b, token, body)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(msg, "for 2026-10 is spent") || !strings.Contains(msg, "It resets on 2026-11-01 at 00:00 UTC") {
		t.Fatalf("second call in October = %d %q, want a 403 saying October's budget is spent and resets on 2026-11-01", resp.StatusCode, msg)
	}
	// In another time zone it is already November; in UTC it is not.
	clk.Set(time.Date(2026, 11, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)))
	if resp := post(b, token, body); resp.StatusCode != 403 {
		t.Errorf("a call at 23:30 UTC on October 31 = %d, want 403", resp.StatusCode)
	}
	clk.Set(time.Date(2026, 11, 1, 0, 0, 1, 0, time.UTC))
	if resp := post(b, token, body); resp.StatusCode != 200 {
		t.Fatalf("first call in November = %d %s", resp.StatusCode, resp.Body)
	}
	price, _ := b.Server.Meter.Prices().Lookup("claude-sonnet-4-5")
	cost := price.Cost(spend.Tokens{Input: 12, Output: 6})
	for _, month := range []string{"2026-10", "2026-11"} {
		if spent := boxSpent(settled(t, b.Server.Store, "salad", month)); spent != cost {
			t.Errorf("spent in %s = %d, want %d", month, spent, cost)
		}
		if us := brokertest.Usage(t, b.Server.Store, "salad", month, 1); len(us) != 1 || us[0].Calls != 1 {
			t.Errorf("usage in %s = %+v, want one call", month, us)
		}
	}
}

// TestBudget_Principal: a budget on a principal holds the calls it pays
// for, and no one else's.
func TestBudget_Principal(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{})
	ctx := context.Background()
	box, err := b.Server.Store.Box(ctx, "salad")
	if err != nil {
		t.Fatal(err)
	}
	box.PayerKind, box.PayerPrincipal = protocol.PayerOwner, "github:ann"
	if err := b.Server.Store.UpdateBox(ctx, box); err != nil {
		t.Fatal(err)
	}
	b.Server.Cache.Drop(store.ChangeBox, "salad")
	b.SetCredential("owner:salad", key+"-OWNER")
	other := b.AddBox("soup")
	b.Report(other, brokertest.Entry("inference", "agent"))
	for _, bud := range []store.Budget{
		{Box: "salad", Principal: "github:ann", Limit: 1, UpdatedAt: time.Now()},
		{Box: "soup", Principal: "github:ann", Limit: 1, UpdatedAt: time.Now()},
	} {
		if err := b.Server.Store.SetBudget(ctx, bud); err != nil {
			t.Fatal(err)
		}
	}
	body := messagesBody("claude-haiku-4-5", 100, false)
	resp := post(b, token, body)
	_, msg := brokertest.Refusal(resp.Body)
	month := spend.Month(time.Now())
	want := "The monthly budget for github:ann on this box of $0.000001 for " + month + " is spent"
	if resp.StatusCode != 403 || !strings.HasPrefix(msg, want) || !strings.Contains(msg, "--principal github:ann") {
		t.Errorf("owner-paid call over ann's budget = %d %q, want 403 beginning %q", resp.StatusCode, msg, want)
	}
	if got := resp.Header.Get(protocol.HeaderPayer); got != "owner github:ann" {
		t.Errorf("chant-payer on the refusal = %q, want %q", got, "owner github:ann")
	}
	// soup is paid by the shared credential: ann's budget there is not its.
	if resp := post(b, other, body); resp.StatusCode != 200 {
		t.Errorf("shared-paid call on soup = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	for _, s := range b.Upstream.Seen() {
		if s.Header.Get("X-Api-Key") == key+"-OWNER" {
			t.Errorf("a call over ann's budget reached the upstream")
		}
	}
}

// TestSpend_Decide: decide's calls are metered, one per question asked.
func TestSpend_Decide(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{})
	body := `{"model":"claude-sonnet-4-5","state":{"n":1},"questions":{` +
		`"a":{"type":"noul","instructions":"Is n one?","criteria":{}},` +
		`"b":{"type":"choice","instructions":"Pick.","criteria":{"x":"X","y":"Y"}},` +
		`"c":{"type":"never-heard-of-it","instructions":"?","criteria":{}}}}`
	resp := b.Do("POST", "/decide/v1/systemone", token, []byte(body), http.Header{"Content-Type": {"application/json"}})
	if resp.StatusCode != 200 {
		t.Fatalf("decide = %d %s", resp.StatusCode, resp.Body)
	}
	month := spend.Month(time.Now())
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 2)
	price, _ := b.Server.Meter.Prices().Lookup("claude-sonnet-4-5")
	want := store.Usage{Box: "salad", Month: month, PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 2, InputTokens: 24, OutputTokens: 12,
		Cost: 2 * price.Cost(spend.Tokens{Input: 12, Output: 6})}
	if len(us) != 1 || us[0] != want {
		t.Errorf("usage = %+v, want %+v", us, want)
	}
	// Over budget, decide is refused before any question is asked.
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: want.Cost, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Written behind the broker's back: its cache learns of it at its next
	// poll of the change log, or at once here.
	b.Server.Cache.Drop(store.ChangeBudget, "salad")
	settled(t, b.Server.Store, "salad", month)
	seen := len(b.Upstream.Seen())
	resp = b.Do("POST", "/decide/v1/systemone", token, []byte(body), http.Header{"Content-Type": {"application/json"}})
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 403 || !strings.Contains(msg, "budget") {
		t.Errorf("decide over budget = %d %q, want a 403 about the budget", resp.StatusCode, msg)
	}
	if got := len(b.Upstream.Seen()); got != seen {
		t.Errorf("decide over budget reached the upstream %d times", got-seen)
	}
	// A request that asks nothing costs nothing and is not refused.
	none := `{"model":"claude-sonnet-4-5","state":{},"questions":{"c":{"type":"never-heard-of-it","instructions":"?","criteria":{}}}}`
	if resp := b.Do("POST", "/decide/v1/systemone", token, []byte(none), nil); resp.StatusCode != 200 {
		t.Errorf("decide asking nothing, over budget = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}

// TestSpend_NotMetered: calls that cost nothing are neither metered nor
// held to a budget.
func TestSpend_NotMetered(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{})
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: 0, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/llm/anthropic/v1/messages/count_tokens", string(messagesBody("claude-sonnet-4-5", 10, false))},
		{"GET", "/llm/anthropic/v1/models", ""},
	} {
		if resp := b.Do(c.method, c.path, token, []byte(c.body), nil); resp.StatusCode != 200 {
			t.Errorf("%s %s with a zero budget = %d %s, want 200", c.method, c.path, resp.StatusCode, resp.Body)
		}
	}
	resp := post(b, token, messagesBody("claude-sonnet-4-5", 10, false))
	if resp.StatusCode != 403 {
		t.Errorf("Messages with a zero budget = %d, want 403", resp.StatusCode)
	}
	us, err := b.Server.Store.ListUsage(context.Background(), "salad", spend.Month(time.Now()))
	if err != nil || len(us) != 0 {
		t.Errorf("usage = %+v, %v, want none", us, err)
	}
}

// TestSpend_LargeBodyReadWholeForABudget: a body over MaxRead from a box
// held to a budget is read whole, not left unread, bounded by what it
// holds (its length and its own max_tokens, with no source the API
// fetches), and forwarded whole.
func TestSpend_LargeBodyReadWholeForABudget(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{Config: func(c *server.Config) { c.ReserveMaxTokens = 1000 }})
	pad := strings.Repeat("x", inference.MaxRead)
	body, _ := json.Marshal(map[string]any{"model": "claude-haiku-4-5", "max_tokens": 5, "messages": []map[string]any{{"role": "user", "content": pad}}})
	want := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 1000))
	if unread := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Calls: 1, Unbounded: true}, Input: int64(len(body))/spend.BytesPerToken + 1 + spend.OverheadTokens, Output: 1000}); want >= unread {
		t.Fatalf("the test is wrong: the bound read from the body, %d, must be under the unread body's, %d", want, unread)
	}
	// A budget just under the bound: refused, though max_tokens is 5.
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: want - 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if resp := post(b, token, body); resp.StatusCode != 403 {
		t.Fatalf("large body, budget under its bound = %d, want 403", resp.StatusCode)
	}
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: want, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if resp := post(b, token, body); resp.StatusCode != 200 {
		t.Fatalf("large body, budget at its bound = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	seen := b.Upstream.Seen()
	if len(seen) != 1 || !bytes.Equal(seen[0].Body, body) {
		t.Errorf("upstream received %d calls, want 1 with the body whole", len(seen))
	}
}

func TestOverBudget_Message(t *testing.T) {
	e := &store.OverBudgetError{Budget: store.Budget{Box: "salad", Limit: 25_000_000}, Month: "2026-12", Spent: 24_990_000, Reserved: 20_000}
	err := spend.OverBudget(e, 50_000)
	want := "This box's monthly budget of $25.00 for 2026-12 is spent: $24.99 charged and $0.02 held for calls in flight, " +
		"and this call could cost up to $0.05. It resets on 2027-01-01 at 00:00 UTC; the owner can raise it with `boxbroker budget set salad AMOUNT`."
	if err.Status != 403 || err.Type != protocol.TypePermission || err.Message != want {
		t.Errorf("OverBudget = %d %s %q, want 403 permission_error %q", err.Status, err.Type, err.Message, want)
	}
	if !errors.Is(e, store.ErrOverBudget) {
		t.Errorf("errors.Is(OverBudgetError, ErrOverBudget) = false")
	}
}

func TestUnboundable_Message(t *testing.T) {
	why := "its server tool of type \"web_search_20250305\" sets no max_uses"
	tests := []struct {
		budget store.Budget
		want   string
	}{
		{store.Budget{Box: "salad", Limit: 5_000_000},
			"This call is refused because it could cost more than any bound the broker can set, and it would be paid within this box's monthly budget of $5.00: " +
				why + ". The owner can allow such calls only by removing that budget, with `boxbroker budget remove salad`."},
		{store.Budget{Box: "salad", Principal: "github:ann", Limit: 5_000_000},
			"This call is refused because it could cost more than any bound the broker can set, and it would be paid within the monthly budget for github:ann on this box of $5.00: " +
				why + ". The owner can allow such calls only by removing that budget, with `boxbroker budget remove salad --principal github:ann`."},
		{store.Budget{Box: "salad", Window: "day", Limit: 5_000_000},
			"This call is refused because it could cost more than any bound the broker can set, and it would be paid within this box's daily budget of $5.00: " +
				why + ". The owner can allow such calls only by removing that budget, with `boxbroker budget remove salad --window day`."},
	}
	for _, tt := range tests {
		err := spend.Unboundable(tt.budget, why)
		if err.Status != 403 || err.Type != protocol.TypePermission || err.Message != tt.want {
			t.Errorf("Unboundable(%+v) = %d %s %q, want 403 permission_error %q", tt.budget, err.Status, err.Type, err.Message, tt.want)
		}
	}
}

// TestBudget_Visitor: a visitor's calls, paid with their own credential
// through a grant, are held to their budget on the box and recorded under
// their principal; the box's own calls are not.
func TestBudget_Visitor(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{})
	ctx := context.Background()
	value, _, err := grant.Issue(ctx, b.Server.Store, "salad", "github:ann", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.SetCredential("visitor:github:ann", key+"-VISITOR")
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "salad", Principal: "github:ann", Limit: 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	body := messagesBody("claude-haiku-4-5", 100, false)
	withGrant := http.Header{"Content-Type": {"application/json"}, protocol.HeaderGrant: {value}}
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, body, withGrant)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || !strings.HasPrefix(msg, "The monthly budget for github:ann on this box of $0.000001") {
		t.Errorf("visitor's call over their budget = %d %q, want 403 naming github:ann's budget", resp.StatusCode, msg)
	}
	if got := resp.Header.Get(protocol.HeaderPayer); got != "visitor github:ann" {
		t.Errorf("chant-payer on the refusal = %q, want %q", got, "visitor github:ann")
	}
	if resp := post(b, token, body); resp.StatusCode != 200 {
		t.Errorf("the box's own call = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "salad", Principal: "github:ann", Limit: 1_000_000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if resp := b.Do("POST", "/llm/anthropic/v1/messages", token, body, withGrant); resp.StatusCode != 200 {
		t.Fatalf("visitor's call within their budget = %d %s", resp.StatusCode, resp.Body)
	}
	month := spend.Month(time.Now())
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 2)
	if len(us) != 2 || us[0].PayerKind != "shared" || us[1].PayerKind != "visitor" || us[1].Principal != "github:ann" || us[1].Calls != 1 {
		t.Errorf("usage = %+v, want one shared call and one of visitor github:ann", us)
	}
	ts := settled(t, b.Server.Store, "salad", month)
	if len(ts) != 2 || ts[1].Principal != "github:ann" || ts[1].Spent != us[1].Cost || ts[0].Spent != us[0].Cost+us[1].Cost {
		t.Errorf("tallies = %+v, want ann's charged her call, the box both", ts)
	}
}

// TestSpend_NoBudgetBodyForwardedAsItComes: a box without a budget has
// its body forwarded unread, whole, and an answer whose usage cannot be
// read is recorded under the model the body named and charged the bound
// the body would have been given read before forwarding.
func TestSpend_NoBudgetBodyForwardedAsItComes(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "\x0b\x02\x80{}\x03") // not JSON: unmeasured
	})
	rec := &brokertest.Recorder{Handler: up}
	b, token := newBroker(t, brokertest.Options{Anthropic: rec})
	body := messagesBody("claude-haiku-4-5", 2000, false)
	for i, length := range []string{"known", "unknown"} {
		var src io.Reader = bytes.NewReader(body)
		if length == "unknown" {
			src = io.MultiReader(src) // sent chunked
		}
		req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", src)
		req.Header.Set("X-Api-Key", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("length %s: POST = %d", length, resp.StatusCode)
		}
		seen := rec.Seen()
		if len(seen) != i+1 || !bytes.Equal(seen[i].Body, body) {
			t.Fatalf("length %s: upstream did not receive the body whole", length)
		}
	}
	month := spend.Month(time.Now())
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 2)
	bound := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000))
	if len(us) != 1 || us[0].Model != "claude-haiku-4-5" || us[0].Unmeasured != 2 || us[0].Cost != 0 {
		t.Errorf("usage = %+v, want two unmeasured calls of claude-haiku-4-5", us)
	}
	if spent := boxSpent(settled(t, b.Server.Store, "salad", month)); spent != 2*bound {
		t.Errorf("spent = %d, want twice the bound %d", spent, bound)
	}
}

// TestSpend_TokenOrCredentialAsTheModelIsNeverKept: a box that names its
// own token as the model, and an upstream that answers with the
// credential as the model, have neither kept in the usage rows an
// operator or owner reads. Bounded by a 5 s wait for the batch.
func TestSpend_TokenOrCredentialAsTheModelIsNeverKept(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		model := r.Header.Get("X-Api-Key")
		if r.URL.Query().Has("own") {
			model = ""
		}
		fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`, model)
	})
	b, token := newBroker(t, brokertest.Options{Anthropic: up})
	body, _ := json.Marshal(map[string]any{"model": token, "max_tokens": 5, "messages": []any{}})
	for _, path := range []string{"/llm/anthropic/v1/messages?own", "/llm/anthropic/v1/messages"} {
		if resp := b.Do("POST", path, token, body, http.Header{"Content-Type": {"application/json"}}); resp.StatusCode != 200 {
			t.Fatalf("status %d %s", resp.StatusCode, resp.Body)
		}
	}
	var us []store.Usage
	for deadline := time.Now().Add(5 * time.Second); ; {
		var err error
		us, err = b.Server.Store.ListUsage(context.Background(), "salad", spend.Month(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		for _, u := range us {
			calls += int(u.Calls)
		}
		if calls == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListUsage = %+v after 5 s, want 2 calls", us)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, u := range us {
		if strings.Contains(u.Model, token[4:]) || strings.Contains(u.Model, key) {
			t.Errorf("a usage row keeps the model %q", u.Model)
		}
	}
}

// TestRateLimit_StreamCutOffCountsItsOutputBound: a box held to output
// tokens a minute, with no budget, reads a stream's content and goes away
// before its message_delta, the one event that says how much was output.
// The call counts its output bound (its max_tokens) against the limit, so
// the next call in the minute is refused: going away before each stream
// ends passes the limit by no more than the calls in flight.
func TestRateLimit_StreamCutOffCountsItsOutputBound(t *testing.T) {
	var calls atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		evs := streamEvents("claude-haiku-4-5", 3)
		if calls.Add(1) > 1 {
			_, _ = io.WriteString(w, strings.Join(evs, ""))
			return
		}
		for _, ev := range evs[:6] { // up to the last content delta
			_, _ = io.WriteString(w, ev)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	b, token := newBroker(t, brokertest.Options{Anthropic: up})
	ctx := context.Background()
	if err := b.Server.Store.SetRateLimit(ctx, store.RateLimit{Box: "salad", OutputTPM: 1000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Rates.Round(ctx); err != nil {
		t.Fatal(err)
	}
	body := messagesBody("claude-haiku-4-5", 4000, true)
	req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", bytes.NewReader(body))
	req.Header.Set("X-Api-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		ev, err := readEvent(br)
		if err != nil {
			t.Fatalf("stream ended before its content: %v", err)
		}
		if strings.Contains(ev, "message_delta") {
			t.Fatal("the stand-in sent message_delta")
		}
		if strings.Contains(ev, "content_block_delta") {
			break // the content, as the box wants it; it goes away
		}
	}
	resp.Body.Close()
	us := brokertest.Usage(t, b.Server.Store, "salad", spend.Month(time.Now()), 1)
	if us[0].Unmeasured != 1 || us[0].OutputTokens > 1 {
		t.Fatalf("usage = %+v, want one unmeasured call whose output was not read", us)
	}
	next := post(b, token, messagesBody("claude-haiku-4-5", 10, false))
	if next.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the next call in the minute = %d %s, want 429: the call cut off counted output 1, not its bound 4000", next.StatusCode, next.Body)
	}
}
