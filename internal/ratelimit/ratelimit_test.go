package ratelimit_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/ratelimit"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(postgrestest.Main(m)) }

// memStore is store.RateLimits in memory: the limits, and the rows the
// replicas exchange.
type memStore struct {
	mu     sync.Mutex
	limits []store.RateLimit
	counts map[[2]string]store.RateCount
}

func (m *memStore) SetRateLimit(_ context.Context, l store.RateLimit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limits = append(m.limits, l)
	return nil
}

func (m *memStore) ListRateLimits(context.Context, string) ([]store.RateLimit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.RateLimit(nil), m.limits...), nil
}

func (m *memStore) DeleteRateLimit(context.Context, string, string) error { return store.ErrNotFound }

// ExchangeRates returns every other replica's row: memStore has no clock
// of its own, so none is stale.
func (m *memStore) ExchangeRates(_ context.Context, replica string, mine []store.RateCount, _ time.Duration) ([]store.RateCount, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[[2]string]store.RateCount{}
	}
	for _, c := range mine {
		c.Replica = replica
		m.counts[[2]string{c.Key, replica}] = c
	}
	var out []store.RateCount
	for k, c := range m.counts {
		if k[1] != replica {
			out = append(out, c)
		}
	}
	return out, nil
}

// enrolled is when the boxes the tests count were enrolled (their
// CreatedAt).
var enrolled = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

// clock is a clock tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newLimiter(t testing.TB, st store.RateLimits, c *clock, exchange bool) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Config{Store: st, Now: c.now, Exchange: exchange})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLimiter_RequestsAMinute(t *testing.T) {
	st := &memStore{limits: []store.RateLimit{{Box: "alpha", RPM: 3}}}
	c := &clock{time.Unix(1_000_000, 0)}
	l := newLimiter(t, st, c, false)
	for i := range 3 {
		if f := l.Admit("alpha", enrolled, ""); f != nil {
			t.Fatalf("Admit #%d = %+v, want admitted", i+1, f)
		}
		c.t = c.t.Add(10 * time.Second)
	}
	f := l.Admit("alpha", enrolled, "")
	if f == nil || f.Of != "requests" || f.RetryAfter != 30*time.Second {
		t.Fatalf("Admit #4 = %+v, want refused on requests, retry after 30s (the first call leaves the minute)", f)
	}
	if f := l.Admit("beta", enrolled, ""); f != nil {
		t.Errorf("Admit(beta), a box with no limit = %+v, want admitted", f)
	}
	c.t = c.t.Add(30 * time.Second)
	if f := l.Admit("alpha", enrolled, ""); f != nil {
		t.Errorf("Admit a minute after the first = %+v, want admitted", f)
	}
}

// TestLimiter_OutputTokensChargedAfter: output tokens are known only once
// a call is answered; the call that passes the limit is let through, and
// the next is refused while the minute holds more than the limit.
func TestLimiter_OutputTokensChargedAfter(t *testing.T) {
	st := &memStore{limits: []store.RateLimit{{Box: "alpha", Principal: "github:ann", OutputTPM: 100, InputTPM: 1000}}}
	c := &clock{time.Unix(1_000_000, 0)}
	l := newLimiter(t, st, c, false)
	if f := l.Admit("alpha", enrolled, "github:ann"); f != nil {
		t.Fatalf("Admit = %+v, want admitted", f)
	}
	l.Charge("alpha", enrolled, "github:ann", 10, 150)
	f := l.Admit("alpha", enrolled, "github:ann")
	if f == nil || f.Of != "output tokens" || f.Used != 150 || f.Limit.Principal != "github:ann" {
		t.Fatalf("Admit past the output limit = %+v, want refused on ann's output tokens", f)
	}
	if f := l.Admit("alpha", enrolled, "github:bob"); f != nil {
		t.Errorf("Admit(bob) = %+v, want admitted (ann's limit is not bob's)", f)
	}
}

// TestLimiter_ReplicasShareALimit: what one replica counted holds the
// other once they have exchanged counts.
func TestLimiter_ReplicasShareALimit(t *testing.T) {
	st := &memStore{limits: []store.RateLimit{{Box: "alpha", RPM: 4}}}
	c := &clock{time.Unix(1_000_000, 0)}
	a, b := newLimiter(t, st, c, true), newLimiter(t, st, c, true)
	for range 3 {
		if f := a.Admit("alpha", enrolled, ""); f != nil {
			t.Fatalf("a.Admit = %+v", f)
		}
	}
	ctx := context.Background()
	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if f := b.Admit("alpha", enrolled, ""); f != nil {
		t.Fatalf("b.Admit #4 = %+v, want admitted", f)
	}
	if f := b.Admit("alpha", enrolled, ""); f == nil {
		t.Fatalf("b.Admit #5 = nil, want refused: a's 3 and b's 1 fill the 4 a minute")
	}
}

// TestLimiter_ReplicasShareALimitWhateverTheirClocks: two replicas whose
// clocks are 3 s apart (within the skew that goes unwarned) still share
// a limit: the counts they exchange are stamped and judged fresh by the
// store's clock, not by each replica's.
func TestLimiter_ReplicasShareALimitWhateverTheirClocks(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRateLimit(ctx, store.RateLimit{Box: "alpha", RPM: 4, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	behind, ahead := &clock{now.Add(-3 * time.Second)}, &clock{now}
	a, b := newLimiter(t, st, behind, true), newLimiter(t, st, ahead, true)
	for range 3 {
		if f := a.Admit("alpha", enrolled, ""); f != nil {
			t.Fatalf("a.Admit = %+v", f)
		}
	}
	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if f := b.Admit("alpha", enrolled, ""); f != nil {
		t.Fatalf("b.Admit #4 = %+v, want admitted", f)
	}
	if f := b.Admit("alpha", enrolled, ""); f == nil {
		t.Fatalf("b.Admit #5 = nil, want refused: a's 3 (its clock 3 s behind b's) and b's 1 fill the 4 a minute")
	}
}

// TestLimiter_BoxAddedUnderARemovedOnesNameStartsAfresh: a box is
// removed and another added under its name with the same limit within
// one round (a scripted `box remove`, `box add`, `limit set`), so the
// limit's key is never gone from memory: the new box's minute holds
// nothing of the removed box's calls, on this replica or as another
// replica reports them, nor of the tokens of a call of the removed box
// that settles after, and that call is not judged by the new box's.
func TestLimiter_BoxAddedUnderARemovedOnesNameStartsAfresh(t *testing.T) {
	st := &memStore{limits: []store.RateLimit{{Box: "alpha", RPM: 2, OutputTPM: 100}}}
	c := &clock{time.Unix(1_000_000, 0)}
	a, b := newLimiter(t, st, c, true), newLimiter(t, st, c, true)
	for _, l := range []*ratelimit.Limiter{a, b} {
		if f := l.Admit("alpha", enrolled, ""); f != nil {
			t.Fatalf("Admit(the removed box) = %+v, want admitted", f)
		}
	}
	ctx := context.Background()
	for _, l := range []*ratelimit.Limiter{a, b, a} {
		if err := l.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f := a.Admit("alpha", enrolled, ""); f == nil {
		t.Fatalf("Admit(the removed box) #3 = nil, want refused, or this test shows nothing")
	}
	added := enrolled.Add(time.Hour)
	if f := a.Admit("alpha", added, ""); f != nil {
		t.Fatalf("Admit(the new box) = %+v, want admitted: its minute holds none of the removed box's calls", f)
	}
	a.Charge("alpha", enrolled, "", 0, 500) // the removed box's call settles
	if f := a.Admit("alpha", added, ""); f != nil {
		t.Errorf("Admit(the new box) #2 = %+v, want admitted: the removed box's tokens are not its own", f)
	}
	if f := a.Admit("alpha", enrolled, ""); f != nil {
		t.Errorf("Admit(the removed box) after the new box's calls = %+v, want it judged by no count of the new box's", f)
	}
	if f := a.Admit("alpha", added, ""); f == nil {
		t.Errorf("Admit(the new box) #3 = nil, want refused by its own two calls")
	}
}
