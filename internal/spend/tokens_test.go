package spend_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/spend"
)

// TestBudget_InputOfATokenAByteIsBounded: a body's text may run to a
// token for every byte or two (digits set apart, whitespace runs, rare
// Unicode), not the three bytes a token the input bound assumed. A box
// sending such text, written to the 1-hour cache, was charged past a
// budget its bound fit. The bound is a token a byte, up to the model's
// context window: the call is refused, or charged within the budget.
func TestBudget_InputOfATokenAByteIsBounded(t *testing.T) {
	text := strings.Repeat("7 ", 75_000) // a token for every two bytes
	body, _ := json.Marshal(map[string]any{
		"model": "claude-haiku-4-5", "max_tokens": 1,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": text, "cache_control": map[string]any{"type": "ephemeral", "ttl": "1h"}}}}},
	})
	tokens := int64(len(text) / 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":"max_tokens","usage":{"input_tokens":10,"cache_creation_input_tokens":%d,"cache_creation":{"ephemeral_1h_input_tokens":%d},"output_tokens":1}}`, tokens, tokens)
	})
	b, _ := newBroker(t, brokertest.Options{Anthropic: h})
	m := b.Server.Meter
	e := estimateMessages(body, int64(len(body)), 64000)
	if e.Input < int64(len(body)) {
		t.Errorf("input bound of a body of %d bytes = %d tokens, want at least a token a byte", len(body), e.Input)
	}
	// A budget of the bound at three bytes a token.
	third := e
	third.Input = int64(len(body))/3 + 1 + spend.OverheadTokens
	limit := m.Bound(third)
	n, spent := callsWithin(t, h, limit, body)
	if spent > limit {
		t.Errorf("%d call(s) of %d tokens in %d bytes spent %d, past the budget %d", n, tokens, len(body), spent, limit)
	}
	// A budget of the bound: one call, charged within it.
	limit = m.Bound(e)
	price, _ := m.Prices().Lookup("claude-haiku-4-5")
	cost := price.Cost(spend.Tokens{Input: 10, CacheWrite: tokens, CacheWrite1h: tokens, Output: 1})
	if n, spent := callsWithin(t, h, limit, body); n != 1 || spent != cost || spent > limit {
		t.Errorf("a budget of %d served %d call(s) and spent %d, want 1 and %d", limit, n, spent, cost)
	}
}

// TestBound_InputIsCappedAtTheModelsWindow: a token a byte is bounded by
// the model's context window, which the API refuses an input over,
// unbilled; a model the table does not hold is not capped.
func TestBound_InputIsCappedAtTheModelsWindow(t *testing.T) {
	m, err := spend.New(spend.Config{Store: nopStore{}})
	if err != nil {
		t.Fatal(err)
	}
	est := func(model string, input int64, ctx1M bool) spend.Estimate {
		return spend.Estimate{Estimate: capability.Estimate{Model: model, Calls: 1, Context1M: ctx1M}, Input: input, Output: 1}
	}
	for _, tt := range []struct {
		model  string
		ctx1M  bool
		window int64
	}{
		{"claude-haiku-4-5", false, spend.DefaultContext},
		{"claude-sonnet-4-5", false, spend.DefaultContext},
		{"claude-sonnet-4-5", true, spend.Context1M},
		{"claude-opus-4-6", false, spend.Context1M},
	} {
		if got, want := m.Bound(est(tt.model, 30_000_000, tt.ctx1M)), m.Bound(est(tt.model, tt.window, tt.ctx1M)); got != want {
			t.Errorf("Bound of %s (1M beta %v) with 30M input tokens = %d, want %d (its window's %d)", tt.model, tt.ctx1M, got, want, tt.window)
		}
		unbounded := est(tt.model, 30_000_000, tt.ctx1M)
		unbounded.Unbounded, unbounded.Rounds = true, 2
		window := est(tt.model, tt.window, tt.ctx1M)
		if got, want := m.Bound(unbounded), 2*m.Bound(window); got > want+1 || got < want-1 {
			t.Errorf("Bound of %s (1M beta %v), 2 samplings of what the API fetches, with 30M input tokens = %d, want %d (its window's %d, twice)", tt.model, tt.ctx1M, got, want, tt.window)
		}
	}
	if got, capped := m.Bound(est("claude-haiku-9", 30_000_000, false)), m.Bound(est("claude-haiku-9", spend.Context1M, false)); got <= capped {
		t.Errorf("Bound of a model the table does not hold, 30M input tokens = %d, want over %d (capped at 1M)", got, capped)
	}
}
