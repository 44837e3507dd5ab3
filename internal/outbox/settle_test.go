package outbox

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// settleStore records the settlements applied to it.
type settleStore struct {
	store.Audit
	mu  sync.Mutex // guards got
	got []store.Settlement
}

func (s *settleStore) ApplySpooled(_ context.Context, _ string, settle []store.Settlement, _ []store.AuditEntry) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, settle...)
	return true, nil
}

func (s *settleStore) settled() []store.Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Settlement(nil), s.got...)
}

// usage is a settlement's one row: calls of model with in and out tokens,
// costing cost.
func usage(box, model string, calls, in, out, cost int64) store.Settlement {
	return store.Settlement{Box: box, Principal: "", Month: "2026-10", Charge: cost,
		Usage: []store.Usage{{Box: box, Month: "2026-10", PayerKind: "shared", Model: model, Calls: calls, InputTokens: in, OutputTokens: out, Cost: cost}}}
}

// batching opens an outbox over a settleStore with RunBatches running
// (batches every hour, so only stop settles one); stop ends RunBatches
// and returns once it has.
func batching(t *testing.T) (o *Outbox, st *settleStore, stop func()) {
	t.Helper()
	st = &settleStore{}
	o, err := Open(Config{Dir: t.TempDir(), Store: st, BatchEvery: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { o.RunBatches(ctx); close(ran) }()
	for !o.batching.Load() {
		time.Sleep(time.Millisecond)
	}
	return o, st, func() { cancel(); <-ran }
}

// TestQueue_MergesByBoxPrincipalMonth: calls queued are settled together,
// one settlement per box, principal and month, with their charges and
// usage summed; nothing queued is lost when batching stops; and once it
// has stopped Queue takes nothing (the caller settles).
func TestQueue_MergesByBoxPrincipalMonth(t *testing.T) {
	o, st, stop := batching(t)
	for _, s := range []store.Settlement{
		usage("salad", "claude-sonnet-4-5", 1, 100, 10, 1000),
		usage("salad", "claude-sonnet-4-5", 1, 200, 20, 2000),
		usage("salad", "claude-haiku-4-5", 1, 50, 5, 50),
		usage("soup", "claude-sonnet-4-5", 1, 1, 1, 1),
	} {
		if !o.QueueCall(context.Background(), s) {
			t.Fatalf("QueueCall(%+v) = false while batching", s)
		}
	}
	if got := st.settled(); len(got) != 0 {
		t.Fatalf("settled before the batch = %+v, want none", got)
	}
	if n := o.Journal.Pending(); n != 4 {
		t.Errorf("journal holds %d records before the batch, want 4", n)
	}
	stop() // the batch is settled as RunBatches stops
	byBox := map[string]store.Settlement{}
	for _, s := range st.settled() {
		if _, twice := byBox[s.Box]; twice {
			t.Errorf("box %s settled twice in one batch", s.Box)
		}
		byBox[s.Box] = s
	}
	s := byBox["salad"]
	if s.Charge != 3050 || len(s.Usage) != 2 {
		t.Fatalf("salad's batch = charge %d, %d usage rows, want 3050, 2", s.Charge, len(s.Usage))
	}
	for _, u := range s.Usage {
		if u.Model == "claude-sonnet-4-5" && (u.Calls != 2 || u.InputTokens != 300 || u.OutputTokens != 30) {
			t.Errorf("salad's sonnet usage = %+v, want 2 calls, 300 in, 30 out", u)
		}
	}
	if byBox["soup"].Usage == nil {
		t.Errorf("soup's call was not settled")
	}
	if n := o.Journal.Pending(); n != 0 {
		t.Errorf("journal holds %d records once the batch is done, want 0", n)
	}
	// Once batching has stopped, Queue takes nothing; Settle settles at once.
	if o.QueueCall(context.Background(), usage("salad", "claude-sonnet-4-5", 1, 1, 1, 1)) {
		t.Errorf("Queue after RunBatches stopped = true, want false")
	}
	n := len(st.settled())
	if err := o.Settle(context.Background(), usage("salad", "claude-sonnet-4-5", 1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if got := len(st.settled()); got != n+1 {
		t.Errorf("Settle after RunBatches stopped: %d settlements, want %d", got, n+1)
	}
}

// TestQueue_KeepsApartTheBoxesOfOneName: calls queued of a box removed
// and of the box added under its name (the same name, enrolled at
// another time) are settled apart, each naming its own box, so that
// the store charges the removed box's to neither; calls of one box
// merge whatever zone their box's time is written in. A settlement
// journaled without the box's time (as before it was kept) is read
// back naming none.
func TestQueue_KeepsApartTheBoxesOfOneName(t *testing.T) {
	removed := time.Date(2026, 10, 3, 14, 30, 15, 123456000, time.UTC)
	added := removed.Add(time.Minute)
	of := func(created time.Time, cost int64) store.Settlement {
		s := usage("salad", "claude-sonnet-4-5", 1, 1, 1, cost)
		s.BoxCreated = created
		return s
	}
	o, st, stop := batching(t)
	for _, s := range []store.Settlement{of(removed, 1), of(added, 10), of(removed.In(time.FixedZone("CEST", 2*60*60)), 100)} {
		if !o.QueueCall(context.Background(), s) {
			t.Fatalf("QueueCall(%+v) = false while batching", s)
		}
	}
	stop()
	charged := map[time.Time]int64{}
	for _, s := range st.settled() {
		charged[s.BoxCreated] += s.Charge
	}
	if want := map[time.Time]int64{removed: 101, added: 10}; len(charged) != 2 || charged[removed] != 101 || charged[added] != 10 {
		t.Errorf("charged by the box's enrolment = %v, want %v", charged, want)
	}

	var l struct {
		T *store.Settlement `json:"t"`
	}
	if err := json.Unmarshal([]byte(`{"t":{"Reservation":0,"Box":"salad","Principal":"","Month":"2026-10","Charge":5,"Usage":null}}`), &l); err != nil || l.T == nil || !l.T.BoxCreated.IsZero() || l.T.Charge != 5 {
		t.Errorf("a settlement journaled without its box's time = %+v, %v; want it read, naming none", l.T, err)
	}
}

// TestQueue_MergesCacheByEntryAndHour: the prompt-cache use of calls
// queued together is summed by payer kind, pool entry and hour, never
// across entries or hours.
func TestQueue_MergesCacheByEntryAndHour(t *testing.T) {
	o, st, stop := batching(t)
	hour := time.Date(2026, 10, 3, 14, 0, 0, 0, time.UTC)
	cached := func(entry string, h time.Time, read int64) store.Settlement {
		s := usage("salad", "claude-haiku-4-5", 1, 10, 1, 1)
		s.Cache = []store.CacheUsage{{Box: "salad", PayerKind: "shared", Entry: entry, Hour: h, Calls: 1, InputTokens: 10, CacheReadTokens: read}}
		return s
	}
	for _, s := range []store.Settlement{cached("a", hour, 100), cached("a", hour, 200), cached("b", hour, 5), cached("a", hour.Add(time.Hour), 7)} {
		if !o.QueueCall(context.Background(), s) {
			t.Fatalf("Queue = false while batching")
		}
	}
	stop()
	got := st.settled()
	if len(got) != 1 {
		t.Fatalf("settled %d batches, want 1", len(got))
	}
	want := []store.CacheUsage{
		{Box: "salad", PayerKind: "shared", Entry: "a", Hour: hour, Calls: 2, InputTokens: 20, CacheReadTokens: 300},
		{Box: "salad", PayerKind: "shared", Entry: "b", Hour: hour, Calls: 1, InputTokens: 10, CacheReadTokens: 5},
		{Box: "salad", PayerKind: "shared", Entry: "a", Hour: hour.Add(time.Hour), Calls: 1, InputTokens: 10, CacheReadTokens: 7},
	}
	if c := got[0].Cache; len(c) != len(want) {
		t.Fatalf("batch's cache = %+v, want %+v", c, want)
	}
	for i, w := range want {
		if c := got[0].Cache[i]; c != w {
			t.Errorf("batch's cache[%d] = %+v, want %+v", i, c, w)
		}
	}
}

// TestQueue_HeldPastStopIsSettledAtOnce: a settlement a Call holds while
// batching runs, whose call concludes only after RunBatches stopped, is
// journaled and settled at once, alone (the path Flush shares), and its
// record is done in the journal: neither lost nor left to a recovery.
func TestQueue_HeldPastStopIsSettledAtOnce(t *testing.T) {
	o, st, stop := batching(t)
	cc := &CallContext{Context: context.Background()}
	if !o.QueueCall(cc, usage("salad", "m", 1, 1, 1, 10)) {
		t.Fatal("QueueCall = false while batching")
	}
	stop()
	if got := st.settled(); len(got) != 0 {
		t.Fatalf("settled %+v before the call concluded, want none", got)
	}
	cc.Call.Close()
	got := st.settled()
	if len(got) != 1 || got[0].Box != "salad" || got[0].Charge != 10 {
		t.Fatalf("settled %+v as the call concluded after the stop, want one settlement of 10 for salad", got)
	}
	if n := o.Journal.Pending(); n != 0 {
		t.Errorf("journal holds %d records once the settlement is done, want 0", n)
	}
}

// heldStore is a settleStore whose first ApplySpooled tells entered and
// waits for release before it applies.
type heldStore struct {
	settleStore
	once             sync.Once
	entered, release chan struct{}
}

func (s *heldStore) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	s.once.Do(func() { close(s.entered); <-s.release })
	return s.settleStore.ApplySpooled(ctx, key, settle, audit)
}

// TestFlush_WaitsForTheBatchAConcurrentFlushTook: a Flush made while
// RunBatches' own is settling the calls it took returns only once they
// are settled, so that what a caller reads after Flush holds every call
// queued before it (a test reading usage right after Flush read none,
// while the batch's tick had taken the call).
func TestFlush_WaitsForTheBatchAConcurrentFlushTook(t *testing.T) {
	st := &heldStore{entered: make(chan struct{}), release: make(chan struct{})}
	o, err := Open(Config{Dir: t.TempDir(), Store: st, BatchEvery: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	o.batching.Store(true)
	if !o.QueueCall(context.Background(), usage("salad", "m", 1, 1, 1, 10)) {
		t.Fatal("QueueCall = false while batching")
	}
	first := make(chan struct{})
	go func() { o.Flush(context.Background()); close(first) }()
	<-st.entered // the first Flush took the batch and is settling it
	returned := make(chan []store.Settlement, 1)
	go func() { o.Flush(context.Background()); returned <- st.settled() }()
	// The batch is released once the second Flush returned, or after a
	// while: a Flush that waits for it returns only then.
	var got []store.Settlement
	select {
	case got = <-returned:
		close(st.release)
	case <-time.After(100 * time.Millisecond):
		close(st.release)
		got = <-returned
	}
	<-first
	if len(got) != 1 || got[0].Box != "salad" || got[0].Charge != 10 {
		t.Fatalf("settled as the second Flush returned = %+v, want salad's settlement of 10", got)
	}
}
