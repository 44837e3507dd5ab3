package spend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/inference"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// context200K is the context window of every model in the default
// price table (spend.DefaultContext; written out, so that these tests
// run against code without it too).
const context200K = 200_000

// urlBody is a Messages request for model, at most maxTokens out, whose
// user message has an image the API fetches by URL: a few hundred bytes
// that can bring in a whole context window of input.
func urlBody(model string, maxTokens int) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": model, "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/huge.png"}},
			{"type": "text", "text": "What is in it?"},
		}}},
	})
	return b
}

// toolBody is a Messages request with tools, a JSON array.
func toolBody(model string, maxTokens int, tools string) []byte {
	return []byte(fmt.Sprintf(`{"model":%q,"max_tokens":%d,"tools":%s,"messages":[{"role":"user","content":"Look it up."}]}`, model, maxTokens, tools))
}

// usageStandIn answers every Messages call with a JSON answer reporting
// input tokens and searches web searches, and counts the calls.
func usageStandIn(calls *atomic.Int64, input, searches int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model     string `json:"model"`
			MaxTokens int64  `json:"max_tokens"`
		}
		_ = json.Unmarshal(body, &req)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d,"server_tool_use":{"web_search_requests":%d}}}`,
			req.Model, input, req.MaxTokens, searches)
	})
}

func setBudget(t *testing.T, st store.Store, limit int64) {
	t.Helper()
	if err := st.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: limit, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestBudget_URLSourceReservesFullContext: an image the API fetches by
// URL can bring in a whole context window of input, which the body's few
// hundred bytes do not bound. A budget of $0.05 once admitted such a call
// (its bound, from the body's size, was a fraction of a cent) and was
// charged far past it; the call now reserves the model's full context at
// its dearest input rate, so the budget refuses it, and a budget that
// covers that bound is never passed by what the call costs.
func TestBudget_URLSourceReservesFullContext(t *testing.T) {
	var calls atomic.Int64
	// The API fetched an image of 190,000 tokens.
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 190_000, 0)})
	body := urlBody("claude-haiku-4-5", 1000)
	small := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-haiku-4-5", Calls: 1}, Input: int64(len(body))/spend.BytesPerToken + 1 + spend.OverheadTokens, Output: 1000})
	full := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-haiku-4-5", Calls: 1}, Input: context200K, Output: 1000})
	if got := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000)); got != full {
		t.Errorf("Bound of a call with a URL source = %d, want the full context's %d (the body's size gives %d)", got, full, small)
	}
	fullContextOnly(t, b, token, body, "URL source", &calls, 190_000, small, full)
}

// TestBudget_ConcurrentURLSourcesNeverOverspend fires 20 calls with URL
// sources at once at a budget that covers two of them at full context.
// Each reports a full context of input. Once, all 20 were admitted and
// the budget was passed many times over; now exactly 2 reach the
// upstream, and what is spent stays within the budget.
func TestBudget_ConcurrentURLSourcesNeverOverspend(t *testing.T) {
	const n, fits, maxTokens = 20, 2, 1000
	var arrived, refused atomic.Int64
	gate := make(chan struct{})
	var once sync.Once
	release := func() {
		if arrived.Load()+refused.Load() == n {
			once.Do(func() { close(gate) })
		}
	}
	var calls atomic.Int64
	answer := usageStandIn(&calls, context200K, 0)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		release()
		<-gate
		answer.ServeHTTP(w, r)
	})
	b, token := newBroker(t, brokertest.Options{Anthropic: up})
	body := urlBody("claude-sonnet-4-5", maxTokens)
	// What two calls can cost at full context, and half a third.
	bound := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-sonnet-4-5", Calls: 1}, Input: context200K, Output: maxTokens})
	limit := fits*bound + bound/2
	setBudget(t, b.Server.Store, limit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
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
			statuses[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[200] != fits || statuses[403] != n-fits {
		t.Errorf("answers = %v, want %d × 200 and %d × 403", statuses, fits, n-fits)
	}
	if got := arrived.Load(); got != fits {
		t.Errorf("upstream received %d calls, want %d", got, fits)
	}
	spent := boxSpent(settled(t, b.Server.Store, "salad", spend.Month(time.Now())))
	if spent > limit {
		t.Errorf("spent %d, past the budget %d", spent, limit)
	}
}

// TestBudget_ServerToolReservesOrRefuses: a server tool runs at the API,
// each use adding to the call's input (and a web search adding its fee),
// so a web search with max_uses reserves a full context for each round
// the uses allow, plus the searches; one without max_uses has no bound at
// all, and a payer held to a budget is refused it with a message saying
// why and how the owner allows it. A box without a budget is unaffected.
func TestBudget_ServerToolReservesOrRefuses(t *testing.T) {
	const model, maxTokens = "claude-haiku-4-5", 500
	price, _ := spend.DefaultPrices().Lookup(model)
	t.Run("no max_uses is refused", func(t *testing.T) {
		var calls atomic.Int64
		b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 1)})
		setBudget(t, b.Server.Store, 1_000_000_000) // $1000: no bound fits
		body := toolBody(model, maxTokens, `[{"type":"web_search_20250305","name":"web_search"}]`)
		resp := post(b, token, body)
		typ, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != 403 || typ != protocol.TypePermission || !strings.Contains(msg, "max_uses") ||
			!strings.Contains(msg, "`boxbroker budget remove salad`") || !strings.Contains(msg, "web_search_20250305") {
			t.Errorf("web search without max_uses = %d %s %q, want 403 naming the tool, max_uses and how the owner allows it", resp.StatusCode, typ, msg)
		}
		if got := resp.Header.Get(protocol.HeaderPayer); got == "" {
			t.Errorf("refusal without %s", protocol.HeaderPayer)
		}
		mcp := []byte(`{"model":"claude-haiku-4-5","max_tokens":5,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}],"messages":[{"role":"user","content":"hi"}]}`)
		if resp := post(b, token, mcp); resp.StatusCode != 403 {
			t.Errorf("MCP servers = %d, want 403", resp.StatusCode)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("upstream received %d calls, want none", n)
		}
	})
	t.Run("max_uses reserves every round and search", func(t *testing.T) {
		var calls atomic.Int64
		b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 150_000, 3)})
		body := toolBody(model, maxTokens, `[{"type":"web_search_20250305","name":"web_search","max_uses":3}]`)
		want := 4*(context200K*int64(2*price.Input)+maxTokens*int64(price.Output)) + 3*10_000
		bound := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000))
		if bound != want {
			t.Fatalf("Bound = %d, want 4 rounds of a full context and output, and 3 searches: %d", bound, want)
		}
		setBudget(t, b.Server.Store, bound-1)
		if resp := post(b, token, body); resp.StatusCode != 403 {
			t.Fatalf("budget just under the bound = %d, want 403", resp.StatusCode)
		}
		setBudget(t, b.Server.Store, bound)
		if resp := post(b, token, body); resp.StatusCode != 200 {
			t.Fatalf("budget at the bound = %d %s, want 200", resp.StatusCode, resp.Body)
		}
		cost := price.Cost(spend.Tokens{Input: 150_000, Output: maxTokens}) + 3*10_000 // $10 a thousand searches
		if spent := boxSpent(settled(t, b.Server.Store, "salad", spend.Month(time.Now()))); spent != cost {
			t.Errorf("spent = %d, want the call's cost with its searches, %d", spent, cost)
		}
	})
	t.Run("a box without a budget is unaffected", func(t *testing.T) {
		var calls atomic.Int64
		b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 1)})
		body := toolBody(model, maxTokens, `[{"type":"web_search_20250305","name":"web_search"}]`)
		if resp := post(b, token, body); resp.StatusCode != 200 {
			t.Errorf("web search without max_uses, no budget = %d %s, want 200", resp.StatusCode, resp.Body)
		}
	})
	t.Run("another principal's budget does not apply", func(t *testing.T) {
		var calls atomic.Int64
		b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 1)})
		if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Principal: "github:ann", Limit: 1, UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		body := toolBody(model, maxTokens, `[{"type":"web_search_20250305","name":"web_search"}]`)
		if resp := post(b, token, body); resp.StatusCode != 200 {
			t.Errorf("web search without max_uses, paid by the operator, ann's budget set = %d %s, want 200", resp.StatusCode, resp.Body)
		}
	})
}

// TestBudget_Context1MReservesTheMillion: a call that asks for the 1M
// window with a URL source reserves a million tokens, at the
// long-context rates.
func TestBudget_Context1MReservesTheMillion(t *testing.T) {
	var calls atomic.Int64
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 0)})
	body := urlBody("claude-sonnet-4-5", 1000)
	full := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-sonnet-4-5", Calls: 1}, Input: context200K, Output: 1000})
	million := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-sonnet-4-5", Calls: 1, Context1M: true}, Input: 1_000_000, Output: 1000})
	if million <= 5*full {
		t.Fatalf("the test is wrong: the 1M bound %d is not far over the 200K bound %d", million, full)
	}
	setBudget(t, b.Server.Store, million-1)
	h := http.Header{"Content-Type": {"application/json"}, "Anthropic-Beta": {"context-1m-2025-08-07"}}
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, body, h)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 403 || !strings.Contains(msg, spend.FormatUSD(million)) {
		t.Errorf("1M window, URL source, budget under a million tokens' bound = %d %q, want 403 naming %s", resp.StatusCode, msg, spend.FormatUSD(million))
	}
	if resp := post(b, token, body); resp.StatusCode != 200 {
		t.Errorf("200K window, same budget = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}

// TestBudget_LargeBodyIsReadForItsTools is the attack on a broker that
// does not read a Messages body over inference.MaxRead (1 MiB): a box
// held to a budget pads its body past that, with a web search tool that
// sets no max_uses, so the tool goes unseen, one sampling is reserved,
// and the API may sample the model and search as often as it likes. The
// body is read whole for a budgeted payer, sent with its length or
// chunked, and the call is refused as one that names the tool in a small
// body is; a box with no budget is forwarded as before.
func TestBudget_LargeBodyIsReadForItsTools(t *testing.T) {
	const model = "claude-haiku-4-5"
	pad := strings.Repeat("x", inference.MaxRead)
	body := []byte(fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":%q}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, model, pad))
	send := func(b *brokertest.Broker, token string, chunked bool) (int, string) {
		t.Helper()
		var rd io.Reader = bytes.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // no length: sent chunked
		}
		req, err := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", token)
		resp, err := b.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		_, msg := brokertest.Refusal(got)
		return resp.StatusCode, msg
	}
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked %v", chunked), func(t *testing.T) {
			var calls atomic.Int64
			b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 1)})
			setBudget(t, b.Server.Store, 1_000_000_000) // $1000: covers a full context many times over
			if status, msg := send(b, token, chunked); status != 403 || !strings.Contains(msg, "max_uses") || !strings.Contains(msg, "web_search_20250305") {
				t.Errorf("a body over 1 MiB with a web search and no max_uses = %d %q, want 403 naming the tool and max_uses", status, msg)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("upstream received %d calls, want none", n)
			}
		})
	}
	t.Run("no budget", func(t *testing.T) {
		var calls atomic.Int64
		b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 1)})
		if status, msg := send(b, token, false); status != 200 || calls.Load() != 1 {
			t.Errorf("no budget = %d %q (%d upstream calls), want 200 forwarded", status, msg, calls.Load())
		}
	})
}

// TestBudget_Base64ImagesReserveFullContext: the API counts an image by
// its pixels, not its bytes, so a PNG of a few hundred bytes (one colour,
// 1568 by 735 pixels) is some 1,500 tokens, and 40 of them some 60,000,
// in a body whose bytes bound a third of that. A budget of $0.05 admitted
// such a call and was charged past it; a base64 image or PDF now makes
// the call reserve a full context, as a URL source does.
func TestBudget_Base64ImagesReserveFullContext(t *testing.T) {
	var calls atomic.Int64
	// The API counted 40 images of some 1,500 tokens each.
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 60_000, 0)})
	png := strings.Repeat("A", 400) // the bytes of a small, flat PNG, base64
	var blocks []map[string]any
	for range 40 {
		blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": png}})
	}
	body, _ := json.Marshal(map[string]any{"model": "claude-haiku-4-5", "max_tokens": 1000,
		"messages": []map[string]any{{"role": "user", "content": blocks}}})
	small := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-haiku-4-5", Calls: 1}, Input: int64(len(body))/spend.BytesPerToken + 1 + spend.OverheadTokens, Output: 1000})
	full := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-haiku-4-5", Calls: 1}, Input: context200K, Output: 1000})
	fullContextOnly(t, b, token, body, "40 base64 images", &calls, 60_000, small, full)
}

// fullContextOnly holds a call whose input the body does not bound (what
// names it) to its full-context bound full: the call costs what input
// tokens and 1,000 output tokens of claude-haiku-4-5 cost, more than $0.05
// and more than small, the bound its body's size alone would give. A
// $0.05 budget refuses it, saying what it could cost, with nothing sent
// upstream; a budget of full admits it, and what is spent is its cost.
func fullContextOnly(t *testing.T, b *brokertest.Broker, token string, body []byte, what string, calls *atomic.Int64, input, small, full int64) {
	t.Helper()
	price, _ := b.Server.Meter.Prices().Lookup("claude-haiku-4-5")
	cost := price.Cost(spend.Tokens{Input: input, Output: 1000})
	if cost <= 50_000 || small >= 50_000 {
		t.Fatalf("the test is wrong: cost %d and the body's bound %d must straddle $0.05", cost, small)
	}
	setBudget(t, b.Server.Store, 50_000) // $0.05
	resp := post(b, token, body)
	typ, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || typ != protocol.TypePermission || !strings.Contains(msg, "could cost up to "+spend.FormatUSD(full)) {
		t.Fatalf("%s, $0.05 budget = %d %s %q, want 403 permission_error saying it could cost up to %s", what, resp.StatusCode, typ, msg, spend.FormatUSD(full))
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%s: upstream received %d calls, want none", what, n)
	}
	setBudget(t, b.Server.Store, full)
	if resp := post(b, token, body); resp.StatusCode != 200 {
		t.Fatalf("%s, budget of its full-context bound = %d %s, want 200", what, resp.StatusCode, resp.Body)
	}
	if spent := boxSpent(settled(t, b.Server.Store, "salad", spend.Month(time.Now()))); spent != cost || spent > full {
		t.Errorf("%s: spent = %d, want the call's cost %d, within the budget %d", what, spent, cost, full)
	}
}

// TestSpend_HugeReportedUsageIsBounded: an upstream that reports 2^62
// input tokens on each of two calls. Once, their usage summed past an
// int64 and SQLite refused the settlement ("cannot store REAL value in
// INTEGER column"), which then held the spool. The bound held: each count
// is taken as spend.MaxReportedTokens, the store keeps both calls with
// 2 × that many input tokens, and nothing is spooled or set aside. Bounded
// by a 5 s wait for the batch; a few hundred ms on loopback.
func TestSpend_HugeReportedUsageIsBounded(t *testing.T) {
	var calls atomic.Int64
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 1<<62, 0)})
	for i := range 2 {
		if r := post(b, token, messagesBody("claude-haiku-4-5", 100, false)); r.StatusCode != 200 {
			t.Fatalf("call #%d = %d %s", i+1, r.StatusCode, r.Body)
		}
	}
	month := time.Now().UTC().Format("2006-01")
	var u []store.Usage
	for deadline := time.Now().Add(5 * time.Second); ; {
		var err error
		u, err = b.Server.Store.ListUsage(context.Background(), "salad", month)
		if err != nil {
			t.Fatal(err)
		}
		if len(u) == 1 && u[0].Calls == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListUsage = %+v after 5 s, want one row of 2 calls (spool %d bytes, %d dead letters)",
				u, b.Server.Spool.Size(), b.Server.Spool.DeadCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := int64(2 * spend.MaxReportedTokens); u[0].InputTokens != want {
		t.Errorf("InputTokens kept = %d, want %d (two calls at spend.MaxReportedTokens)", u[0].InputTokens, want)
	}
	if u[0].Cost <= 0 {
		t.Errorf("Cost kept = %d, want above zero", u[0].Cost)
	}
	if n, d := b.Server.Spool.Size(), b.Server.Spool.DeadCount(); n != 0 || d != 0 {
		t.Errorf("spool %d bytes, %d dead letters; want none", n, d)
	}
}

// TestBudget_UnboundableCallPastAWindowBudgetIsRefused: a box held only
// to a budget over a window (a day, a week, rolling days; its own or its
// paying principal's), with no monthly budget, sends a call whose cost
// nothing bounds (a web search with no max_uses, MCP servers): it is
// refused as it would be under a monthly budget, and nothing reaches the
// upstream, where the API could sample and search past the window's
// limit. A window budget of another principal leaves the call alone.
func TestBudget_UnboundableCallPastAWindowBudgetIsRefused(t *testing.T) {
	const model, maxTokens = "claude-haiku-4-5", 500
	unbounded := toolBody(model, maxTokens, `[{"type":"web_search_20250305","name":"web_search"}]`)
	mcp := []byte(`{"model":"claude-haiku-4-5","max_tokens":5,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}],"messages":[{"role":"user","content":"hi"}]}`)
	tests := []struct {
		name, window, principal string
		refused                 bool
	}{
		{"the box's daily budget", "day", "", true},
		{"the box's weekly budget", "week", "", true},
		{"the box's rolling budget", "7d", "", true},
		{"another principal's daily budget", "day", "github:ann", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 1)})
			if err := b.Server.Store.SetWindowBudget(context.Background(), store.Budget{Box: "salad", Principal: tt.principal, Window: tt.window,
				Limit: 1_000_000_000, UpdatedAt: time.Now()}); err != nil { // $1000: no bound fits
				t.Fatal(err)
			}
			b.Sync()
			for _, body := range [][]byte{unbounded, mcp} {
				resp := post(b, token, body)
				typ, msg := brokertest.Refusal(resp.Body)
				switch {
				case tt.refused && (resp.StatusCode != 403 || typ != protocol.TypePermission || !strings.Contains(msg, "could cost more than any bound") ||
					!strings.Contains(msg, "`boxbroker budget remove salad --window "+tt.window+"`")):
					t.Errorf("unboundable call = %d %s %q, want 403 saying nothing bounds it and how the owner removes the window's budget", resp.StatusCode, typ, msg)
				case !tt.refused && resp.StatusCode != 200:
					t.Errorf("unboundable call under another principal's budget = %d %s, want 200", resp.StatusCode, resp.Body)
				}
			}
			if want := map[bool]int64{true: 0, false: 2}[tt.refused]; calls.Load() != want {
				t.Errorf("upstream received %d calls, want %d", calls.Load(), want)
			}
		})
	}
}

// TestBudget_FastModeIsRefusedWithinABudget: a call asking for fast mode
// ("speed": "fast") is billed at a multiple of its model's rates (six
// times on Claude Opus 4.6) that the price table does not hold, so a box
// that asked for it on every call spent several times its budget while
// the broker charged it the standard rates. From a payer held to a
// budget it is refused before anything is sent; "standard" speed, and a
// box without a budget, are unaffected.
func TestBudget_FastModeIsRefusedWithinABudget(t *testing.T) {
	body := func(speed string) []byte {
		return []byte(`{"model":"claude-opus-4-6","max_tokens":5,` + speed + `"messages":[{"role":"user","content":"hi"}]}`)
	}
	var calls atomic.Int64
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 0)})
	for _, speed := range []string{`"speed":"fast",`, `"speed":"standard","speed":"fast",`, `"speed":"FAST",`} {
		if resp := post(b, token, body(speed)); resp.StatusCode != 200 {
			t.Errorf("%s without a budget = %d %s, want 200", speed, resp.StatusCode, resp.Body)
		}
	}
	setBudget(t, b.Server.Store, 1_000_000_000) // $1000: any standard bound fits
	b.Sync()                                    // the calls above left the cache holding no budget
	before := calls.Load()
	for _, speed := range []string{`"speed":"fast",`, `"speed":"standard","speed":"fast",`, `"speed":"FAST",`} {
		resp := post(b, token, body(speed))
		typ, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != 403 || typ != protocol.TypePermission || !strings.Contains(msg, "speed") || !strings.Contains(msg, "`boxbroker budget remove salad`") {
			t.Errorf("%s within a budget = %d %s %q, want 403 naming the speed and how the owner allows it", speed, resp.StatusCode, typ, msg)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("upstream received %d fast calls within a budget, want none", n)
	}
	for _, speed := range []string{`"speed":"standard",`, `"speed":null,`, ``} {
		if resp := post(b, token, body(speed)); resp.StatusCode != 200 {
			t.Errorf("%s within a budget = %d %s, want 200", speed, resp.StatusCode, resp.Body)
		}
	}
}

// TestBudget_UnreadMaxTokensIsRefusedWithinABudget: a max_tokens written
// with an exponent or a fraction (1.28e5, 128000.0) is no int64 to
// encoding/json, so the meter read nothing of the body and bounded the
// call's output by --reserve-max-tokens (64,000), while an API that takes
// the number as 128000 may output twice that. From a payer held to a
// budget such a body is refused before anything is sent, naming how to
// write it; written as an integer, or from a box without a budget, it is
// forwarded.
func TestBudget_UnreadMaxTokensIsRefusedWithinABudget(t *testing.T) {
	body := func(max string) []byte {
		return []byte(`{"model":"claude-opus-4-6","max_tokens":` + max + `,"messages":[{"role":"user","content":"hi"}]}`)
	}
	var calls atomic.Int64
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 0)})
	unread := []string{`1.28e5`, `128000.0`, `1.28E+5`}
	for _, max := range unread {
		if resp := post(b, token, body(max)); resp.StatusCode != 200 {
			t.Errorf("max_tokens %s without a budget = %d %s, want 200", max, resp.StatusCode, resp.Body)
		}
	}
	// A fresh broker, its box's budget set before its first call.
	b, token = newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 0)})
	setBudget(t, b.Server.Store, 1_000_000_000) // $1000: any bound fits
	before := calls.Load()
	for _, max := range unread {
		resp := post(b, token, body(max))
		typ, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != 403 || typ != protocol.TypePermission || !strings.Contains(msg, "max_tokens") || !strings.Contains(msg, "`boxbroker budget remove salad`") {
			t.Errorf("max_tokens %s within a budget = %d %s %q, want 403 naming max_tokens and how the owner allows it", max, resp.StatusCode, typ, msg)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("upstream received %d calls of an unread max_tokens within a budget, want none", n)
	}
	if resp := post(b, token, body(`128000`)); resp.StatusCode != 200 {
		t.Errorf("max_tokens 128000 within a budget = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}

// TestBudget_ClientToolsBoundTheirDefinitions: the Anthropic-defined
// client tools (bash, text_editor, computer) are named in the body by
// their type, a few bytes, but the API writes their definitions into the
// prompt: some 245, 700 and 735 input tokens. A body naming the three
// was bounded by its bytes and the 1024 tokens of overhead alone, under
// what the API charges; each such tool adds to the input bound.
func TestBudget_ClientToolsBoundTheirDefinitions(t *testing.T) {
	b, _ := newBroker(t, brokertest.Options{})
	body := toolBody("claude-opus-4-6", 1000, `[{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"bash_20250124","name":"bash"}]`)
	charged := int64(len(body))/spend.BytesPerToken + 1 + spend.OverheadTokens + 245 + 700 + 735
	want := b.Server.Meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-opus-4-6", Calls: 1}, Input: charged, Output: 1000})
	if got := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), 64000)); got < want {
		t.Errorf("Bound of a call with the computer, text editor and bash tools = %d, under the %d of their definitions' input", got, want)
	}
}

// TestBudget_CodeExecutionIsRefusedWithinABudget: the code execution
// tool runs code in a container the API bills by its time ($0.05 an
// hour, at least 5 minutes a call), which the usage does not report and
// no member of a call bounds: with max_uses set on it, a budgeted box's
// calls were reserved their tokens only, and their container time went
// unreserved and uncharged. From a payer held to a budget such a call is
// refused, naming the tool, with nothing sent; beside a web search or
// web fetch tool of version 20260209 or later, which makes code execution
// free, it is bounded as any server tool is; without a budget it is
// forwarded.
func TestBudget_CodeExecutionIsRefusedWithinABudget(t *testing.T) {
	const (
		exec     = `{"type":"code_execution_20250825","name":"code_execution","max_uses":3}`
		search   = `{"type":"web_search_20260209","name":"web_search","max_uses":2}`
		search25 = `{"type":"web_search_20250305","name":"web_search","max_uses":2}`
	)
	var calls atomic.Int64
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 0)})
	billed := []string{`[` + exec + `]`, `[` + search25 + `,` + exec + `]`, `[{"type":"code_execution_20260521","name":"code_execution","max_uses":1}]`}
	for _, tools := range billed {
		if resp := post(b, token, toolBody("claude-haiku-4-5", 100, tools)); resp.StatusCode != 200 {
			t.Errorf("tools %s without a budget = %d %s, want 200", tools, resp.StatusCode, resp.Body)
		}
	}
	setBudget(t, b.Server.Store, 1_000_000_000) // $1000: any token bound fits
	b.Sync()
	before := calls.Load()
	for _, tools := range billed {
		resp := post(b, token, toolBody("claude-haiku-4-5", 100, tools))
		typ, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != 403 || typ != protocol.TypePermission || !strings.Contains(msg, "code_execution_") || !strings.Contains(msg, "container") {
			t.Errorf("tools %s within a budget = %d %s %q, want 403 naming the tool and its container", tools, resp.StatusCode, typ, msg)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("upstream received %d code execution calls within a budget, want none", n)
	}
	for _, tools := range []string{`[` + exec + `,` + search + `]`, `[` + search + `]`} {
		if resp := post(b, token, toolBody("claude-haiku-4-5", 100, tools)); resp.StatusCode != 200 {
			t.Errorf("tools %s within a budget = %d %s, want 200", tools, resp.StatusCode, resp.Body)
		}
	}
}
