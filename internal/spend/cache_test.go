package spend_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// cachingPool is an Anthropic stand-in for a pool of keys, each with a
// prompt cache of its own: the warm key's answers read the prompt from
// its cache, every other key's write it. The limited key answers 429,
// as a key over its rate limit does.
type cachingPool struct {
	mu      sync.Mutex // guards warm and limited
	warm    string
	limited string
}

func (c *cachingPool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	warm, limited := c.warm, c.limited
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	key := r.Header.Get("X-Api-Key")
	if key == limited {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This key is over its rate limit."}}`)
		return
	}
	read, write := 0, 990
	if key == warm {
		read, write = 990, 0
	}
	fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],`+
		`"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":5}}`, write, read)
}

// addPoolEntry adds to b's credential pool the entry name, of weight 1,
// with key, and tells b's cache.
func addPoolEntry(t *testing.T, b *brokertest.Broker, name, key string) {
	t.Helper()
	sealed, err := b.Server.Keyring.Seal([]byte(key), pool.AD(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: name, Weight: 1, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.Server.Cache.Drop(store.ChangePool, name)
}

// TestSpend_CacheHitRatioPerBoxAndEntry: a box paid from a pool of two
// keys hits its prompt cache on its first key; when that key is limited
// the box moves to the other, where its cache is cold. The store keeps
// each call's cache reads, writes and uncached input by the entry that
// served it, and the spend report shows the old entry's ratio beside the
// new entry's, month and last 24 hours, and the box's 24-hour ratio
// fallen.
func TestSpend_CacheHitRatioPerBoxAndEntry(t *testing.T) {
	const second = "second"
	keys := map[string]string{pool.Default: key, second: key + "-SECOND"}
	es := []pool.Entry{{Name: pool.Default, Weight: 1}, {Name: second, Weight: 1}}
	first := pool.Order("salad", es)[0]
	other := map[string]string{pool.Default: second, second: pool.Default}[first]
	up := &cachingPool{warm: keys[first]}
	b, token := newBroker(t, brokertest.Options{Anthropic: up})
	ctx := context.Background()
	addPoolEntry(t, b, second, keys[second])

	call := func() {
		t.Helper()
		if r := post(b, token, messagesBody("claude-haiku-4-5", 100, false)); r.StatusCode != 200 {
			t.Fatalf("messages = %d %s, want 200", r.StatusCode, r.Body)
		}
	}
	month := spend.Month(time.Now())
	wantCalls := func(n int64) *spend.CacheReport {
		t.Helper()
		var rep *spend.CacheReport
		deadline := time.Now().Add(10 * time.Second)
		for {
			var err error
			rep, err = spend.Cache(ctx, b.Server.Store, "salad", month, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Total.Month.Calls == n || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rep.Total.Month.Calls != n {
			t.Fatalf("prompt cache of salad: %d calls, want %d", rep.Total.Month.Calls, n)
		}
		return rep
	}
	for range 3 {
		call()
	}
	rep := wantCalls(3)
	if len(rep.Lines) != 1 || rep.Lines[0].Entry != first || rep.Lines[0].Day.HitRatio() != 0.99 {
		t.Fatalf("prompt cache on the first entry = %+v, want one line of %s, hit ratio 0.99", rep.Lines, first)
	}

	// The first key is limited: the box moves to the other entry.
	up.mu.Lock()
	up.limited = keys[first]
	up.mu.Unlock()
	for range 3 {
		call()
	}
	rep = wantCalls(6)
	byEntry := map[string]spend.CacheLine{}
	for _, l := range rep.Lines {
		byEntry[l.Entry] = l
	}
	old, moved := byEntry[first], byEntry[other]
	if old.Month.Calls != 3 || old.Month.CacheReadTokens != 2970 || old.Month.CacheWriteTokens != 0 || old.Month.InputTokens != 30 {
		t.Errorf("the first entry's month = %+v, want 3 calls reading 2970 tokens from the cache, 30 uncached", old.Month)
	}
	if moved.Month.Calls != 3 || moved.Month.CacheWriteTokens != 2970 || moved.Month.CacheReadTokens != 0 || moved.Day.HitRatio() != 0 {
		t.Errorf("the new entry's month = %+v, day %+v, want 3 calls writing 2970 tokens to the cache, none read", moved.Month, moved.Day)
	}
	if old.PayerKind != moved.PayerKind || old.PayerKind == "" {
		t.Errorf("payer kinds %q, %q, want the same, named", old.PayerKind, moved.PayerKind)
	}
	if got := rep.Total.Day.HitRatio(); got < 0.49 || got > 0.5 {
		t.Errorf("salad's 24-hour hit ratio = %.3f, want 0.495 (half its calls on a cold cache)", got)
	}
	// The fleet's report holds the same lines, each naming the box.
	fleet, err := spend.Cache(ctx, b.Server.Store, "", month, time.Now())
	if err != nil || len(fleet.Lines) != 2 || fleet.Lines[0].Box != "salad" || fleet.Total.Month != rep.Total.Month {
		t.Errorf("fleet prompt cache = %+v, %v; want salad's two lines", fleet, err)
	}
}
