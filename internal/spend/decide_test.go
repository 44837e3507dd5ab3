package spend_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// TestBudget_DecideBoundsTheBodiesItWrites: decide asks each question in
// a Messages body of its own, whose output schema holds, for each option
// of a choice, a property with a sentence of description: a box's 2,000
// options of ten bytes make a body of some 300 KB, far past the
// request's 20 KB that the input bound was taken from. A budget of that
// bound admitted the question and was charged past it. The bound is of
// the largest body a question is asked with: the question is refused,
// or charged within the budget.
func TestBudget_DecideBoundsTheBodiesItWrites(t *testing.T) {
	var sent atomic.Int64
	// The stand-in answers from the schema, and counts four bytes a token
	// of the body it received, as English and JSON run.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sent.Store(int64(len(body)))
		var req struct {
			Model        string `json:"model"`
			OutputConfig struct {
				Format struct {
					Schema any `json:"schema"`
				} `json:"format"`
			} `json:"output_config"`
		}
		_ = json.Unmarshal(body, &req)
		v, err := brokertest.AnswerFromSchema(req.OutputConfig.Format.Schema)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		text, _ := json.Marshal(v)
		msg := strings.Replace(upstreamtest.Message(req.Model, string(text)), `"input_tokens":12`, fmt.Sprintf(`"input_tokens":%d`, len(body)/4), 1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, msg)
	})
	opts := make([]string, 2000)
	for i := range opts {
		opts[i] = fmt.Sprintf(`"o%04d":1`, i)
	}
	body := []byte(`{"model":"claude-sonnet-4-5","state":{},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":{` + strings.Join(opts, ",") + `}}}}`)
	decide := func(b *brokertest.Broker, token string) brokertest.Response {
		return b.Do("POST", "/decide/v1/systemone", token, body, http.Header{"Content-Type": {"application/json"}})
	}
	b, token := newBroker(t, brokertest.Options{Anthropic: h})
	if resp := decide(b, token); resp.StatusCode != 200 {
		t.Fatalf("decide without a budget = %d %s", resp.StatusCode, resp.Body)
	}
	if n := sent.Load(); n < 10*int64(len(body)) {
		t.Fatalf("the test is wrong: the question's body of %d bytes is not far over the request's %d", n, len(body))
	}
	month := spend.Month(time.Now())
	settled(t, b.Server.Store, "salad", month)

	// A budget of the bound of the request's own bytes: refused, or
	// charged within it.
	own := spend.Estimate{Estimate: capability.Estimate{Model: "claude-sonnet-4-5", Calls: 1}, Input: int64(len(body)) + spend.OverheadTokens, Output: 2048}
	b2, token2 := newBroker(t, brokertest.Options{Anthropic: h})
	limit := b2.Server.Meter.Bound(own)
	setBudget(t, b2.Server.Store, limit)
	resp := decide(b2, token2)
	if spent := boxSpent(settled(t, b2.Server.Store, "salad", month)); spent > limit {
		t.Errorf("decide of 2,000 options in %d bytes, asked in %d, = %d; spent %d, past the budget %d", len(body), sent.Load(), resp.StatusCode, spent, limit)
	}
	// A budget of the bound of the question's body: answered within it.
	asked := own
	asked.Input = sent.Load() + spend.OverheadTokens
	b3, token3 := newBroker(t, brokertest.Options{Anthropic: h})
	limit = b3.Server.Meter.Bound(asked)
	setBudget(t, b3.Server.Store, limit)
	resp = decide(b3, token3)
	if spent := boxSpent(settled(t, b3.Server.Store, "salad", month)); resp.StatusCode != 200 || spent == 0 || spent > limit {
		t.Errorf("decide within a budget of its question's bound %d = %d; spent %d, want 200 and within", limit, resp.StatusCode, spent)
	}
}

// TestBudget_DecideKeysOneOnlyOnceScrubbedAreMetered: a box names two of
// its questions by one token-shaped key, written once plainly and once
// with its "_" escaped (`bbx\u005f…`), which decode to the same key: a
// request the meter, reading the body as sent, refused as a key given
// twice and so reserved nothing for. Decide replaces each token by a
// marker of its own length before it reads the request, and the two
// markers differ: the request was asked, on the payer's credential, with
// no reservation against the box's budget and no charge after. The meter
// reads the request decide reads: the call is refused by the budget,
// nothing asked.
func TestBudget_DecideKeysOneOnlyOnceScrubbedAreMetered(t *testing.T) {
	var calls atomic.Int64
	b, token := newBroker(t, brokertest.Options{Anthropic: usageStandIn(&calls, 100, 10)})
	setBudget(t, b.Server.Store, 1)
	key := "bbx_" + strings.Repeat("A", 43)
	escaped := strings.Replace(key, "_", `\u005f`, 1)
	q := `{"type":"noul","instructions":"Is it?","criteria":{}}`
	tests := []struct {
		name, body string
	}{
		{"one question", `{"model":"claude-haiku-4-5","state":{},"questions":{"q":` + q + `}}`},
		{"a key twice until scrubbed", `{"model":"claude-haiku-4-5","state":{},"questions":{"` + key + `":` + q + `,"` + escaped + `":` + q + `}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := calls.Load()
			resp := b.Do("POST", "/decide/v1/systemone", token, []byte(tt.body), http.Header{"Content-Type": {"application/json"}})
			if resp.StatusCode == 200 || calls.Load() != before {
				t.Errorf("POST decide past a budget of 1 = %d (%d calls upstream), want refused, nothing asked: %s", resp.StatusCode, calls.Load()-before, resp.Body)
			}
		})
	}
}
