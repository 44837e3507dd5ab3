package spend_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// TestBudget_FailoverStaysWithinTheBudget: a box paid from a pool of two
// keys, the one it comes to first over its rate limit (429), so that a
// call is made twice upstream, once refused and once served. Eight
// calls at once with a budget for two calls' bounds: at most two are
// served, the others refused before anything is sent, and what is
// charged stays within the budget. Failing over makes a call again on
// the same reservation; it never lets a box spend past its budget.
func TestBudget_FailoverStaysWithinTheBudget(t *testing.T) {
	const second = "second"
	keys := map[string]string{pool.Default: key, second: key + "-SECOND"}
	es := []pool.Entry{{Name: pool.Default, Weight: 1}, {Name: second, Weight: 1}}
	first := pool.Order("salad", es)[0]
	up := &cachingPool{limited: keys[first]}
	// A served answer waits until the six other calls are refused (or
	// 5 s): a call settled before another reserved would give back its
	// bound's unspent part, and a third call would then be served within
	// the budget.
	var refused atomic.Int64
	judged := make(chan struct{})
	held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == keys[second] {
			select {
			case <-judged:
			case <-time.After(5 * time.Second):
			}
		}
		up.ServeHTTP(w, r)
	})
	rec := &brokertest.Recorder{Handler: held}
	b, token := newBroker(t, brokertest.Options{Anthropic: rec})
	ctx := context.Background()
	addPoolEntry(t, b, second, keys[second])
	body := messagesBody("claude-haiku-4-5", 100, false)
	bound := b.Server.Meter.Bound(estimateMessages(body, int64(len(body)), spend.DefaultMaxTokens))
	limit := 2 * bound
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "salad", Limit: limit, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.Sync()

	served := race(t, 8, func() int {
		code := post(b, token, body).StatusCode
		if code == http.StatusForbidden && refused.Add(1) == 6 {
			close(judged)
		}
		return code
	})
	if served < 1 || served > 2 {
		t.Errorf("%d calls served, want 1 or 2: the budget holds two calls' bounds", served)
	}
	byKey := map[string]int{}
	for _, s := range rec.Seen() {
		byKey[s.Header.Get("X-Api-Key")]++
	}
	// The first 429 cools the limited key for the box: later calls go
	// to the other at once.
	if byKey[keys[second]] != served || byKey[keys[first]] < 1 || byKey[keys[first]] > served {
		t.Errorf("upstream calls by key = %v, want %d served on the second and 1 to %d refused on the first, no call refused by the budget sent", byKey, served, served)
	}
	if spent := boxSpent(settled(t, b.Server.Store, "salad", spend.Month(time.Now()))); spent > limit {
		t.Errorf("spent %d past the budget of %d", spent, limit)
	}
}

// TestSpend_AnEarlierEntrysKeyIsNeverKeptAsTheModel: a box paid from a
// pool of two keys; the first answers 429, so the call (a Messages call,
// or a decide question) is made again on the second, whose upstream (a
// gateway, say, that saw the first call) answers with the first entry's
// key as the model. The meter reads the answer beneath the box's mask,
// and the call's header carries only the second key: the first is never
// kept in a usage row, the unpriced list, a log line or a proposal.
func TestSpend_AnEarlierEntrysKeyIsNeverKeptAsTheModel(t *testing.T) {
	const second = "second"
	keys := map[string]string{pool.Default: key, second: "sk-ant-api03-SPENDPOOLENTRY"}
	first := pool.Order("salad", []pool.Entry{{Name: pool.Default, Weight: 1}, {Name: second, Weight: 1}})[0]
	tests := []struct {
		name, path, body string
	}{
		{"messages", "/llm/anthropic/v1/messages", string(messagesBody("claude-haiku-4-5", 100, false))},
		{"decide", "/decide/v1/systemone", `{"model":"claude-haiku-4-5","state":null,"questions":{"q":{"type":"noul","instructions":"Yes?","criteria":{}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.Header.Get("X-Api-Key") == keys[first] {
					w.Header().Set("Retry-After", "60")
					w.WriteHeader(http.StatusTooManyRequests)
					fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This key is over its rate limit."}}`)
					return
				}
				fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"{\"reason\":\"yes\",\"noul\":0.5}"}],`+
					`"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`, keys[first])
			})
			rec := &brokertest.Recorder{Handler: up}
			var logs brokertest.Buffer
			b, token := newBroker(t, brokertest.Options{Anthropic: rec, Logs: &logs})
			addPoolEntry(t, b, second, keys[second])
			resp := b.Do("POST", tt.path, token, []byte(tt.body), http.Header{"Content-Type": {"application/json"}})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s = %d %s, want 200", tt.path, resp.StatusCode, resp.Body)
			}
			if seen := rec.Seen(); len(seen) != 2 || seen[0].Header.Get("X-Api-Key") != keys[first] {
				t.Fatalf("upstream took %d calls, want the first on %s, refused, then one on the other", len(seen), first)
			}
			month := spend.Month(time.Now())
			us := brokertest.Usage(t, b.Server.Store, "salad", month, 1)
			// Past its budget, with its owner asked, the box's next call
			// opens a proposal.
			askPastBudget(t, b)
			if resp := b.Do("POST", tt.path, token, []byte(tt.body), http.Header{"Content-Type": {"application/json"}}); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("POST %s past the budget = %d %s, want 403", tt.path, resp.StatusCode, resp.Body)
			}
			ps, err := b.Server.Store.ListProposals(context.Background(), "", "", time.Now(), 100)
			if err != nil || len(ps) == 0 {
				t.Fatalf("ListProposals = %d, %v; want the budget's", len(ps), err)
			}
			kept := fmt.Sprintf("%+v %+v %+v", us, b.Server.Meter.Unpriced(), ps) + logs.String()
			for name, k := range keys {
				if strings.Contains(kept, k) {
					t.Errorf("entry %s's key is kept (usage, unpriced list, proposals, logs):\n%s", name, kept)
				}
			}
		})
	}
}
