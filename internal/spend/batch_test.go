package spend

import (
	"context"
	"sync"
	"testing"
	"time"

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

// call is a measured call of model with in and out tokens.
func call(model string, in, out int64) *ticket {
	return &ticket{readings: []*reading{{model: model, tokens: Tokens{Input: in, Output: out}, measured: true}}}
}

// TestSettle_BatchesCallsThatReservedNothing: calls of a box with no
// budget are settled together, one settlement per box, principal and
// month, with their charges and usage summed; a call that reserved
// settles at once; and nothing queued is lost when batching stops.
func TestSettle_BatchesCallsThatReservedNothing(t *testing.T) {
	st := &settleStore{}
	m, err := New(Config{Store: st, BatchEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { m.RunBatches(ctx); close(ran) }()
	for !m.batching.Load() {
		time.Sleep(time.Millisecond)
	}
	salad := settlement{box: "salad", payer: "shared", month: "2026-10"}
	m.settle(ctx, salad, call("claude-sonnet-4-5", 100, 10))
	m.settle(ctx, salad, call("claude-sonnet-4-5", 200, 20))
	m.settle(ctx, salad, call("claude-haiku-4-5", 50, 5))
	m.settle(ctx, settlement{box: "soup", payer: "shared", month: "2026-10"}, call("claude-sonnet-4-5", 1, 1))
	reserved := salad
	reserved.id = 7
	m.settle(ctx, reserved, call("claude-sonnet-4-5", 1, 1))
	if got := st.settled(); len(got) != 1 || got[0].Reservation != 7 {
		t.Fatalf("settled before the batch = %+v, want only the reserved call", got)
	}
	cancel() // the batch is settled as RunBatches stops
	<-ran
	byBox := map[string]store.Settlement{}
	for _, s := range st.settled()[1:] {
		if _, twice := byBox[s.Box]; twice {
			t.Errorf("box %s settled twice in one batch", s.Box)
		}
		byBox[s.Box] = s
	}
	p, _ := m.cfg.Prices.Lookup("claude-sonnet-4-5")
	h, _ := m.cfg.Prices.Lookup("claude-haiku-4-5")
	want := p.Cost(Tokens{Input: 100, Output: 10}) + p.Cost(Tokens{Input: 200, Output: 20}) + h.Cost(Tokens{Input: 50, Output: 5})
	s := byBox["salad"]
	if s.Charge != want || len(s.Usage) != 2 {
		t.Fatalf("salad's batch = charge %d, %d usage rows, want %d, 2", s.Charge, len(s.Usage), want)
	}
	for _, u := range s.Usage {
		if u.Model == "claude-sonnet-4-5" && (u.Calls != 2 || u.InputTokens != 300 || u.OutputTokens != 30) {
			t.Errorf("salad's sonnet usage = %+v, want 2 calls, 300 in, 30 out", u)
		}
	}
	if byBox["soup"].Usage == nil {
		t.Errorf("soup's call was not settled")
	}
	// Once batching has stopped, a call settles as it ends.
	n := len(st.settled())
	m.settle(context.Background(), salad, call("claude-sonnet-4-5", 1, 1))
	if got := len(st.settled()); got != n+1 {
		t.Errorf("a call after RunBatches stopped: %d settlements, want %d", got, n+1)
	}
}
