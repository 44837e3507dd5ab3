package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// fakeStore is an Store in memory whose writes wait for gate (when
// set) so that a test can fill the queue.
type fakeStore struct {
	gate    chan struct{}
	mu      sync.Mutex // guards entries, batches, pruned, fail
	entries []store.AuditEntry
	batches []int
	pruned  []time.Time
	fail    bool
}

func (f *fakeStore) AddAudit(ctx context.Context, es []store.AuditEntry) error {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return store.ErrUnavailable
	}
	f.entries = append(f.entries, es...)
	f.batches = append(f.batches, len(es))
	return nil
}

func (f *fakeStore) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	return nil, errors.New("not used")
}

func (f *fakeStore) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pruned = append(f.pruned, before)
	return 0, nil
}

// ApplySpooled writes the batch's entries as AddAudit does; fakeStore
// keeps no keys.
func (f *fakeStore) ApplySpooled(ctx context.Context, _ string, _ []store.Settlement, es []store.AuditEntry) (bool, error) {
	return true, f.AddAudit(ctx, es)
}

func (f *fakeStore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries)
}

func entry(i int) store.AuditEntry {
	return store.AuditEntry{Box: "alpha", Method: "GET", Route: "/r", Status: 200 + i}
}

func TestWriter_SyncWritesWhatWasAdded(t *testing.T) {
	st := &fakeStore{}
	now := time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC)
	w := NewWriter(st, AuditOptions{Batch: 4, Retention: 24 * time.Hour, Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	for i := range 10 {
		if !w.Add(entry(i)) {
			t.Fatalf("Add(%d) = false with an empty queue", i)
		}
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.count(); got != 10 {
		t.Errorf("entries written after Sync = %d, want 10", got)
	}
	st.mu.Lock()
	for _, n := range st.batches {
		if n > 4 {
			t.Errorf("a batch of %d entries, want at most 4", n)
		}
	}
	for i, e := range st.entries {
		if e.Status != 200+i {
			t.Errorf("entry %d has status %d, want %d: written out of order", i, e.Status, 200+i)
		}
	}
	if len(st.pruned) == 0 || !st.pruned[0].Equal(now.Add(-24*time.Hour)) {
		t.Errorf("pruned before %v, want once at start before %v", st.pruned, now.Add(-24*time.Hour))
	}
	st.mu.Unlock()
	cancel()
	<-done
}

// TestWriter_FullQueueDrops is the hot path never waiting on a slow store:
// with the store stuck, Add returns at once and counts what it drops.
func TestWriter_FullQueueDrops(t *testing.T) {
	st := &fakeStore{gate: make(chan struct{})}
	w := NewWriter(st, AuditOptions{Queue: 3, Batch: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()

	// Fill the queue; the writer takes at most one entry into a stuck write.
	added := 0
	for i := range 100 {
		if w.Add(entry(i)) {
			added++
		}
	}
	if added < 3 || added > 4 {
		t.Errorf("Add accepted %d of 100 with a queue of 3 and a stuck store, want 3 or 4", added)
	}
	if got := w.Dropped(); got != int64(100-added) {
		t.Errorf("Dropped() = %d, want %d", got, 100-added)
	}
	close(st.gate) // the store answers again
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.count(); got != added {
		t.Errorf("entries written = %d, want the %d queued", got, added)
	}
	cancel()
	<-done
}

func TestWriter_DrainsOnStop(t *testing.T) {
	st := &fakeStore{}
	w := NewWriter(st, AuditOptions{})
	for i := range 5 {
		w.Add(entry(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run starts with its context already over
	w.Run(ctx)
	if got := st.count(); got != 5 {
		t.Errorf("entries written by a stopped Run = %d, want the 5 queued", got)
	}
}

func TestWriter_StoreFailureIsNotFatal(t *testing.T) {
	st := &fakeStore{fail: true}
	w := NewWriter(st, AuditOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	w.Add(entry(0))
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	st.fail = false
	st.mu.Unlock()
	w.Add(entry(1))
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.count(); got != 1 {
		t.Errorf("entries written after one failed write = %d, want 1", got)
	}
	cancel()
	<-done
}

// TestLinger_GathersEntriesIntoOneTransaction: with Linger, entries added
// one by one are written together, and Sync still returns once they are.
func TestLinger_GathersEntriesIntoOneTransaction(t *testing.T) {
	f := &fakeStore{}
	w := NewWriter(f, AuditOptions{Linger: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	for i := 0; i < 5; i++ {
		w.Add(entry(i))
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) != 5 || len(f.batches) != 1 {
		t.Errorf("after Sync: %d entries in batches %v, want 5 in one", len(f.entries), f.batches)
	}
}

// TestLinger_FullBatchDoesNotWait: a lingering batch is written as soon as
// the queue holds a full batch (or the queue is full), not after Linger.
func TestLinger_FullBatchDoesNotWait(t *testing.T) {
	tests := []struct {
		name         string
		queue, batch int
		add          int
	}{
		{"batch fills", 100, 4, 4},
		{"more than a batch", 100, 4, 11},
		{"queue smaller than a batch", 2, 10, 3},
		{"batch of one", 100, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeStore{}
			w := NewWriter(f, AuditOptions{Queue: tt.queue, Batch: tt.batch, Linger: time.Hour})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { w.Run(ctx); close(done) }()
			defer func() {
				w.Sync(ctx)
				cancel()
				<-done
			}()
			added := 0
			for i := range tt.add {
				if w.Add(entry(i)) {
					added++
				}
				// Let Run take the first entry and begin to linger.
				if i == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
			// Every full batch is written at once; what is left waits.
			want := added / tt.batch * tt.batch
			if tt.queue < tt.batch {
				want = added
			}
			// Well within Linger, and within drainFor, which bounds a
			// batch's wait too.
			deadline := time.Now().Add(2 * time.Second)
			for f.count() < want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := f.count(); got < want {
				t.Errorf("%d entries added with Queue %d, Batch %d and an hour's Linger: %d written, want %d without waiting for Linger",
					added, tt.queue, tt.batch, got, want)
			}
		})
	}
}

// TestAudit_TokenInAnEntryFromElsewhereIsNeverKept: an entry added by a
// caller other than the broker (a mint's, whose message quotes a token
// endpoint's refusal) is scrubbed as it is queued: no token, whole or
// cut short, reaches the store in any of its strings.
func TestAudit_TokenInAnEntryFromElsewhereIsNeverKept(t *testing.T) {
	tok := token.BoxPrefix + strings.Repeat("A", 43)
	grant := token.GrantPrefix + strings.Repeat("b", 43)
	cut := token.AdminPrefix + strings.Repeat("c", 40) // a token cut short
	st := &fakeStore{}
	w := NewWriter(st, AuditOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	words := []string{"API", grant}
	w.Add(store.AuditEntry{Box: "alpha", Method: tok, Route: "/egress/" + tok, Capability: "egress", Words: words,
		Status: 502, Reason: "mint-refused", Message: "the endpoint said: " + grant + " and %62bx_" + tok[4:] + " " + cut, PaidBy: tok})
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.entries) != 1 {
		t.Fatalf("entries written = %d, want 1", len(st.entries))
	}
	row := fmt.Sprintf("%+v", st.entries[0])
	for _, s := range []string{tok, grant, tok[4:], cut} {
		if strings.Contains(row, s) {
			t.Errorf("the entry kept holds %.12s…: %s", s, row)
		}
	}
	if words[1] != grant {
		t.Errorf("the caller's words were changed: %q", words)
	}
	if st.entries[0].Words[0] != "API" {
		t.Errorf("words kept = %q, want API first", st.entries[0].Words)
	}
}
