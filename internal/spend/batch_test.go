package spend

import (
	"context"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// settleStore records the settlements it is given.
type settleStore struct {
	store.Spend
	mu  sync.Mutex // guards got
	got []store.Settlement
}

func (s *settleStore) Settle(_ context.Context, st store.Settlement) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, st)
	return nil
}

func (s *settleStore) settled() []store.Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Settlement(nil), s.got...)
}

// queueOutbox is an Outbox that queues while batching is true, and
// settles into a settleStore.
type queueOutbox struct {
	settleStore
	batching bool
	queued   []store.Settlement
}

func (q *queueOutbox) QueueCall(_ context.Context, st store.Settlement) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.batching {
		q.queued = append(q.queued, st)
	}
	return q.batching
}

// call is a measured call of model with in and out tokens.
func call(model string, in, out int64) *ticket {
	return &ticket{readings: []*reading{{model: model, tokens: Tokens{Input: in, Output: out}, measured: true}}}
}

// TestSettle_BatchesCallsThatReservedNothing: calls of a box with no
// budget are queued in the outbox, each charged its priced cost (the
// outbox sums them: see outbox's TestQueue_MergesByBoxPrincipalMonth); a
// call that reserved settles at once; and once the outbox takes no more,
// a call settles as it ends.
func TestSettle_BatchesCallsThatReservedNothing(t *testing.T) {
	ob := &queueOutbox{batching: true}
	m, err := New(Config{Store: &ob.settleStore, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	salad := settlement{box: "salad", payer: "shared", month: "2026-10"}
	m.settle(ctx, salad, call("claude-sonnet-4-5", 100, 10))
	m.settle(ctx, salad, call("claude-sonnet-4-5", 200, 20))
	m.settle(ctx, salad, call("claude-haiku-4-5", 50, 5))
	m.settle(ctx, settlement{box: "soup", payer: "shared", month: "2026-10"}, call("claude-sonnet-4-5", 1, 1))
	reserved := salad
	reserved.id = 7
	m.settle(ctx, reserved, call("claude-sonnet-4-5", 1, 1))
	if got := ob.settled(); len(got) != 1 || got[0].Reservation != 7 {
		t.Fatalf("settled before the batch = %+v, want only the reserved call", got)
	}
	p, _ := m.cfg.Prices.Lookup("claude-sonnet-4-5")
	h, _ := m.cfg.Prices.Lookup("claude-haiku-4-5")
	want := []int64{p.Cost(Tokens{Input: 100, Output: 10}), p.Cost(Tokens{Input: 200, Output: 20}), h.Cost(Tokens{Input: 50, Output: 5})}
	if len(ob.queued) != 4 {
		t.Fatalf("queued %d calls, want 4", len(ob.queued))
	}
	var sum int64
	for i, w := range want {
		q := ob.queued[i]
		if q.Box != "salad" || q.Charge != w || q.Reservation != 0 || len(q.Usage) != 1 {
			t.Errorf("queued[%d] = %+v, want salad charged %d with one usage row", i, q, w)
		}
		sum += q.Charge
	}
	if sum != want[0]+want[1]+want[2] {
		t.Errorf("salad's charges sum to %d, want %d", sum, want[0]+want[1]+want[2])
	}
	if u := ob.queued[1].Usage[0]; u.Model != "claude-sonnet-4-5" || u.Calls != 1 || u.InputTokens != 200 || u.OutputTokens != 20 {
		t.Errorf("salad's second usage = %+v, want 1 sonnet call, 200 in, 20 out", u)
	}
	if ob.queued[3].Box != "soup" || ob.queued[3].Usage == nil {
		t.Errorf("soup's call was not queued: %+v", ob.queued[3])
	}
	// Once the outbox takes no more, a call settles as it ends.
	ob.mu.Lock()
	ob.batching = false
	ob.mu.Unlock()
	n := len(ob.settled())
	m.settle(context.Background(), salad, call("claude-sonnet-4-5", 1, 1))
	if got := len(ob.settled()); got != n+1 {
		t.Errorf("a call after batching stopped: %d settlements, want %d", got, n+1)
	}
}
