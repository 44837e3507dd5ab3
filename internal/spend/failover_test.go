package spend_test

import (
	"context"
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
	rec := &brokertest.Recorder{Handler: up}
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

	served := race(t, 8, func() int { return post(b, token, body).StatusCode })
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
