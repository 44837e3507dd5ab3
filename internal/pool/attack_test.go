package pool_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/server"
)

// setupClock is setup with the pool on a clock of the test's.
func setupClock(t *testing.T) (*brokertest.Broker, *upstream, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(time.Now())
	up := &upstream{answers: map[string]*answer{}}
	b := brokertest.New(t, brokertest.Options{Anthropic: up, ServerOptions: func(o *server.Options) { o.PoolNow = clk.Now }})
	b.SetCredential(pool.SharedID, keys[pool.Default])
	setEntry(t, b, "second", 1)
	setEntry(t, b, "third", 1)
	return b, up, clk
}

// boxesOn returns n box names whose first entry is first, none of them
// in but.
func boxesOn(t *testing.T, first string, n int, but ...string) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n && i < 10000; i++ {
		name := fmt.Sprintf("box-%d", i)
		if order(name)[0] == first && !slices.Contains(but, name) {
			out = append(out, name)
		}
	}
	if len(out) < n {
		t.Fatalf("found %d box names first on %s, want %d", len(out), first, n)
	}
	return out
}

// entries returns the entries of calls, in order.
func entries(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.entry
	}
	return out
}

// calledOnce makes one Messages call of box tok and reports a failure
// unless it was answered 200 by entry want in one upstream call.
func calledOnce(t *testing.T, b *brokertest.Broker, up *upstream, who, tok, want string, body []byte) {
	t.Helper()
	n := len(up.took())
	resp := messages(t, b, tok, body)
	calls := up.took()[n:]
	if resp.StatusCode != 200 || len(calls) != 1 || calls[0].entry != want {
		t.Errorf("%s's call: %d %s, upstream calls on %v; want 200 from %s in one call", who, resp.StatusCode, resp.Body, entries(calls), want)
	}
}

func stateOf(t *testing.T, b *brokertest.Broker, name string) pool.Stat {
	t.Helper()
	stats, err := b.Server.Payer.Pool.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no entry %s in %+v", name, stats)
	return pool.Stat{}
}

// onlyB is a call that only an entry other than the box's first allows:
// a model the first entry's organisation may not use, say.
var onlyB = []byte(`{"model":"claude-only-on-b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)

// A box asks, once, for what only entry B allows. Entry A, whose key is
// sound (it answers the broker's own GET /v1/models), refuses the call
// with a 403 or a 401; B serves it. A stays healthy for every box, and
// another box whose first entry is A is served there at once.
func TestPool_ABoxCannotFailAnEntryByAskingWhatOnlyAnotherAllows(t *testing.T) {
	tests := []struct {
		name    string
		refusal answer
	}{
		{"403", answer{status: 403, body: `{"type":"error","error":{"type":"permission_error","message":"Your organization does not have access to this model."}}`}},
		{"401", answer{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"This credential is not allowed this model."}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, up := setup(t, nil)
			a, bb := order("mallory")[0], order("mallory")[1]
			up.setRule(func(entry, path string, body []byte) *answer {
				if entry == a && bytes.Contains(body, []byte("claude-only-on-b")) {
					r := tt.refusal
					return &r
				}
				return nil
			})
			mallory := box(t, b, "mallory")
			resp := messages(t, b, mallory, onlyB)
			if resp.StatusCode != 200 || !bytes.Contains(resp.Body, []byte("from "+bb)) {
				t.Fatalf("mallory got %d %s, want 200 from %s", resp.StatusCode, resp.Body, bb)
			}
			if st := stateOf(t, b, a); st.State != pool.StateHealthy {
				t.Errorf("entry %s is %q after it refused one box's call another entry served, want %q", a, st.State, pool.StateHealthy)
			}
			name := boxesOn(t, a, 1, "mallory")[0]
			calledOnce(t, b, up, name, box(t, b, name), a, []byte(msgBody))
		})
	}
}

// The same call, but entry A's key is really revoked: the broker's own
// probe of it is refused 401 too, so A fails, for every box.
func TestPool_ARevokedKeyFailsOnTheBrokersOwnProbe(t *testing.T) {
	b, up := setup(t, nil)
	a, bb := order("mallory")[0], order("mallory")[1]
	up.set(a, &answer{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`})
	mallory := box(t, b, "mallory")
	if resp := messages(t, b, mallory, onlyB); resp.StatusCode != 200 || !bytes.Contains(resp.Body, []byte("from "+bb)) {
		t.Fatalf("mallory got %d %s, want 200 from %s", resp.StatusCode, resp.Body, bb)
	}
	if got := up.probes(); !slices.Equal(got, []string{a}) {
		t.Errorf("the broker probed %v, want %s once", got, a)
	}
	if st := stateOf(t, b, a); st.State != pool.StateFailed {
		t.Errorf("entry %s is %q after its probe was refused 401, want %q", a, st.State, pool.StateFailed)
	}
	name := boxesOn(t, a, 1, "mallory")[0]
	other := box(t, b, name)
	n := len(up.took())
	if resp := messages(t, b, other, []byte(msgBody)); resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", name, resp.StatusCode, resp.Body)
	}
	if calls := up.took()[n:]; len(calls) != 1 || calls[0].entry == a {
		t.Errorf("%s's call went to %v, want one call past the failed %s", name, entries(calls), a)
	}
}

// A box that draws 401s from a sound key over and over makes the broker
// probe the key once in ProbeEvery, however many it draws.
func TestPool_ABoxCannotMakeTheBrokerProbeAKeyAtWill(t *testing.T) {
	b, up, clk := setupClock(t)
	a := order("mallory")[0]
	up.setRule(func(entry, path string, body []byte) *answer {
		if entry == a && bytes.Contains(body, []byte("claude-only-on-b")) {
			return &answer{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"not for this key"}}`}
		}
		return nil
	})
	mallory := box(t, b, "mallory")
	for i := 0; i < 10; i++ {
		if resp := messages(t, b, mallory, onlyB); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	if got := up.probes(); !slices.Equal(got, []string{a}) {
		t.Errorf("after 10 calls the broker probed %v, want %s once", got, a)
	}
	clk.Advance(pool.ProbeEvery)
	if resp := messages(t, b, mallory, onlyB); resp.StatusCode != 200 {
		t.Fatalf("call after ProbeEvery: %d %s", resp.StatusCode, resp.Body)
	}
	if got := up.probes(); !slices.Equal(got, []string{a, a}) {
		t.Errorf("after ProbeEvery the broker probed %v, want %s twice", got, a)
	}
	if st := stateOf(t, b, a); st.State != pool.StateHealthy {
		t.Errorf("entry %s is %q, want %q", a, st.State, pool.StateHealthy)
	}
}

// While the broker's probe of a key is under way, however long it takes,
// the 401s other calls draw from that key begin no other probe.
func TestPool_ProbesOfAKeyAreOneAtATime(t *testing.T) {
	clk := clocktest.New(time.Now())
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a := order("mallory")[0]
	up := &upstream{answers: map[string]*answer{}, before: func(entry, path string) {
		if entry == a && path == "/v1/models" {
			once.Do(func() { close(started) })
			<-release
		}
	}}
	b := brokertest.New(t, brokertest.Options{Anthropic: up, ServerOptions: func(o *server.Options) { o.PoolNow = clk.Now }})
	// The probe is let go, and the first call waited for, before the
	// broker and the upstream stop (cleanups run last first), also when
	// the test fails before it lets it go: an upstream's Close waits for
	// the probe its handler holds.
	var released sync.Once
	let := func() { released.Do(func() { close(release) }) }
	var first sync.WaitGroup
	t.Cleanup(func() { let(); first.Wait() })
	b.SetCredential(pool.SharedID, keys[pool.Default])
	setEntry(t, b, "second", 1)
	setEntry(t, b, "third", 1)
	up.setAt(a, "/v1/messages", &answer{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"not for this key"}}`})
	mallory := box(t, b, "mallory")
	done := make(chan brokertest.Response, 1)
	first.Go(func() { done <- messages(t, b, mallory, []byte(msgBody)) })
	select {
	case <-started:
	case resp := <-done:
		t.Fatalf("the first call ended with no probe begun: %d %s", resp.StatusCode, resp.Body)
	}
	clk.Advance(2 * pool.ProbeEvery) // past the interval: only the probe under way holds the others back
	for i := 0; i < 5; i++ {
		if resp := messages(t, b, mallory, []byte(msgBody)); resp.StatusCode != 200 {
			t.Fatalf("call %d while the probe runs: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	// Back to the first call's time, so that it has time left to fail
	// over once its probe ends.
	clk.Advance(-2 * pool.ProbeEvery)
	let()
	if resp := <-done; resp.StatusCode != 200 {
		t.Errorf("the call that began the probe: %d %s", resp.StatusCode, resp.Body)
	}
	if got := up.probes(); !slices.Equal(got, []string{a}) {
		t.Errorf("the broker probed %v, want %s once", got, a)
	}
}

// countTokens makes one count_tokens call of box tok.
func countTokens(t *testing.T, b *brokertest.Broker, tok string) brokertest.Response {
	t.Helper()
	return b.Do("POST", "/llm/anthropic/v1/messages/count_tokens", tok, []byte(msgBody), http.Header{"Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}})
}

// A box floods count_tokens, whose rate limit is its own upstream, until
// entry A answers it 429, and so do others: A's count_tokens limit cools,
// and every box's Messages calls still go to A.
func TestPool_ACountTokensFloodDoesNotCoolMessages(t *testing.T) {
	b, up := setup(t, nil)
	a := order("mallory")[0]
	up.setAt(a, "/v1/messages/count_tokens", &answer{status: 429, header: http.Header{
		"Retry-After":                            {"60"},
		"Anthropic-Ratelimit-Requests-Limit":     {"50"},
		"Anthropic-Ratelimit-Requests-Remaining": {"0"},
	}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"count_tokens limit"}}`})
	flooders := append([]string{"mallory"}, boxesOn(t, a, 1, "mallory")...)
	for _, name := range flooders {
		tok := box(t, b, name)
		for i := 0; i < 10; i++ {
			if resp := countTokens(t, b, tok); resp.StatusCode != 200 {
				t.Fatalf("%s's count_tokens %d: %d %s, want 200 from another entry", name, i, resp.StatusCode, resp.Body)
			}
		}
		// The box's Messages calls are not cooled by its own flood.
		calledOnce(t, b, up, name, tok, a, []byte(msgBody))
	}
	st := stateOf(t, b, a)
	if want := []string{pool.Limit(pool.RouteCountTokens, "requests")}; st.State != pool.StateCooling || !slices.Equal(st.Cooling, want) {
		t.Errorf("entry %s: %q, cooling %v; want %q, cooling %v alone", a, st.State, st.Cooling, pool.StateCooling, want)
	}
	name := boxesOn(t, a, 1, flooders...)[0]
	calledOnce(t, b, up, name, box(t, b, name), a, []byte(msgBody))
}

// One box's calls draw 429s from entry A (big calls, each spending A's
// input-tokens limit): A cools for that box alone, and another box's
// call goes to A at once. Once a second box draws a 429 there too, while
// the first's cooling lasts, A cools for every box.
func TestPool_OneBoxCannotCoolAnEntryForOthers(t *testing.T) {
	b, up := setup(t, nil)
	a, bb := order("mallory")[0], order("mallory")[1]
	reset := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339) // within CoolMax
	up.setRule(func(entry, path string, body []byte) *answer {
		if entry == a && bytes.Contains(body, []byte("flood")) {
			return &answer{status: 429, header: http.Header{
				"Anthropic-Ratelimit-Input-Tokens-Remaining": {"0"},
				"Anthropic-Ratelimit-Input-Tokens-Reset":     {reset},
				"Anthropic-Ratelimit-Requests-Remaining":     {"40"},
			}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"input tokens"}}`}
		}
		return nil
	})
	flood := []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"flood"}]}`)
	floods := func(who, tok string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if resp := messages(t, b, tok, flood); resp.StatusCode != 200 || !bytes.Contains(resp.Body, []byte("from "+order(who)[1])) {
				t.Fatalf("%s's call %d: %d %s, want 200 from %s", who, i, resp.StatusCode, resp.Body, order(who)[1])
			}
		}
	}
	mallory := box(t, b, "mallory")
	floods("mallory", mallory, 5)
	if calls := up.took(); !slices.Equal(entries(calls), []string{a, bb, bb, bb, bb, bb}) {
		t.Errorf("mallory's 5 calls made upstream calls on %v, want %s once then %s alone", entries(calls), a, bb)
	}
	if st := stateOf(t, b, a); st.State != pool.StateHealthy {
		t.Errorf("entry %s is %q after one box's 429s, want %q", a, st.State, pool.StateHealthy)
	}
	others := boxesOn(t, a, 3, "mallory")
	calledOnce(t, b, up, others[0], box(t, b, others[0]), a, []byte(msgBody))

	// The 200 says A's limit has room again: mallory's next flood meets
	// A once more. A second box draws a 429 from A while mallory's
	// cooling lasts: A cools for every box, until the limit's reset.
	floods("mallory", mallory, 1)
	floods(others[1], box(t, b, others[1]), 1)
	st := stateOf(t, b, a)
	if want := []string{pool.Limit(pool.RouteMessages, "input-tokens")}; st.State != pool.StateCooling || !slices.Equal(st.Cooling, want) {
		t.Errorf("entry %s after two boxes' 429s: %q, cooling %v; want %q, cooling %v", a, st.State, st.Cooling, pool.StateCooling, want)
	}
	if got := st.Until.UTC().Format(time.RFC3339); got != reset {
		t.Errorf("entry %s cools until %s, want the limit's reset %s", a, got, reset)
	}
	n := len(up.took())
	if resp := messages(t, b, box(t, b, others[2]), []byte(msgBody)); resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", others[2], resp.StatusCode, resp.Body)
	}
	if calls := up.took()[n:]; len(calls) != 1 || calls[0].entry == a {
		t.Errorf("%s's call went to %v, want one call past the cooling %s", others[2], entries(calls), a)
	}
}

// Three entries all answer 429 with retry-after 4 (to two boxes, so that
// they cool for every box), then all answer 200 (the box's own entry
// serves its calls), then the box's own entry answers 401 to its call:
// the call is made again on the next entry, as it is without the
// episode, whether the 200s came within the retry-after or after it. The
// entry that served is healthy at once.
func TestPool_FailoverResumesOnceEveryEntryCameBack(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration // between the 429s and the 200s
	}{
		{"within the retry-after", time.Second},
		{"after the retry-after", 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, up, clk := setupClock(t)
			for name := range keys {
				up.set(name, &answer{status: 429, header: http.Header{"Retry-After": {"4"}},
					body: `{"type":"error","error":{"type":"rate_limit_error","message":"limited"}}`})
			}
			alpha := box(t, b, "alpha")
			for _, tok := range []string{alpha, box(t, b, "beta")} {
				if resp := messages(t, b, tok, []byte(msgBody)); resp.StatusCode != 429 {
					t.Fatalf("with every entry at 429 the box got %d %s", resp.StatusCode, resp.Body)
				}
			}
			for name := range keys {
				if st := stateOf(t, b, name); st.State != pool.StateCooling {
					t.Fatalf("entry %s is %q after two boxes' 429s, want %q", name, st.State, pool.StateCooling)
				}
				up.set(name, nil)
			}
			clk.Advance(tt.wait)
			first, second := order("alpha")[0], order("alpha")[1]
			for i := 0; i < 3; i++ {
				calledOnce(t, b, up, "alpha", alpha, first, []byte(msgBody))
			}
			if st := stateOf(t, b, first); st.State != pool.StateHealthy {
				t.Errorf("entry %s is %q after it served, want %q", first, st.State, pool.StateHealthy)
			}
			up.setAt(first, "/v1/messages", &answer{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`})
			n := len(up.took())
			resp := messages(t, b, alpha, []byte(msgBody))
			calls := up.took()[n:]
			if resp.StatusCode != 200 || !slices.Equal(entries(calls), []string{first, second}) {
				t.Errorf("after the episode the 401 on %s gave the box %d %s, upstream calls on %v; want %s then %s, and 200", first, resp.StatusCode, resp.Body, entries(calls), first, second)
			}
		})
	}
}

// TestPool_OneBoxsOverloadDoesNotMoveOthers is the attack on a pool that
// cools a whole entry, for every box and model, on one 529: a box asks
// for a model it chose, which the entry answers overloaded, again and
// again, and every other box was moved off the entry (where its prompt
// cache is warm) with a backoff doubling to five minutes. The overload
// cools the entry for that model, and for the box that drew it, until
// another box's overlaps: then the entry cools for that model for
// every box, and calls of another model still go to it.
func TestPool_OneBoxsOverloadDoesNotMoveOthers(t *testing.T) {
	b, up := setup(t, nil)
	a := order("mallory")[0]
	up.setRule(func(entry, path string, body []byte) *answer {
		if entry == a && bytes.Contains(body, []byte("claude-overloaded")) {
			return &answer{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}
		}
		return nil
	})
	heavy := []byte(`{"model":"claude-overloaded","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	overloads := func(who, tok string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if resp := messages(t, b, tok, heavy); resp.StatusCode != 200 || bytes.Contains(resp.Body, []byte("from "+a)) {
				t.Fatalf("%s's call %d: %d %s, want 200 from another entry than %s", who, i, resp.StatusCode, resp.Body, a)
			}
		}
	}
	mallory := box(t, b, "mallory")
	overloads("mallory", mallory, 5)
	if calls := up.took(); len(calls) != 6 || calls[0].entry != a || slices.Contains(entries(calls[1:]), a) {
		t.Errorf("mallory's 5 calls made upstream calls on %v, want %s once then never", entries(calls), a)
	}
	if st := stateOf(t, b, a); st.State != pool.StateHealthy {
		t.Errorf("entry %s is %q (cooling %v) after one box's 529s, want %q", a, st.State, st.Cooling, pool.StateHealthy)
	}
	others := boxesOn(t, a, 3, "mallory")
	calledOnce(t, b, up, others[0], box(t, b, others[0]), a, []byte(msgBody))

	// A second box's overload of the model, while mallory's cooling
	// lasts, cools it for every box: a third box asking for it goes past
	// the entry at once, and its call of another model goes to it.
	overloads(others[1], box(t, b, others[1]), 1)
	st := stateOf(t, b, a)
	if want := []string{pool.Overloaded + "/claude-overloaded"}; st.State != pool.StateCooling || !slices.Equal(st.Cooling, want) {
		t.Errorf("entry %s after two boxes' 529s: %q, cooling %v; want %q, cooling %v", a, st.State, st.Cooling, pool.StateCooling, want)
	}
	third := box(t, b, others[2])
	n := len(up.took())
	overloads(others[2], third, 1)
	if calls := up.took()[n:]; len(calls) != 1 || calls[0].entry == a {
		t.Errorf("%s's call of the overloaded model went to %v, want one call past %s", others[2], entries(calls), a)
	}
	// Calls of another model still go to the entry: mallory's own too.
	calledOnce(t, b, up, others[2], third, a, []byte(msgBody))
	calledOnce(t, b, up, "mallory", mallory, a, []byte(msgBody))
}

// TestPool_AnEarlierEntrysKeyIsNeverAnsweredAfterFailover: the upstream
// (a gateway, say) saw the first entry's key on the call it refused,
// and writes it, with the key of the call it answers, into the answer to
// the call the broker makes again on the next entry. The box reads
// neither: an answer is searched for every key its call was made on.
// (A key the call was never made on is not searched for: the broker
// does not search every answer for every key it holds.)
func TestPool_AnEarlierEntrysKeyIsNeverAnsweredAfterFailover(t *testing.T) {
	first := order("alpha")[0]
	for _, tt := range []struct{ name, path, body string }{
		{"messages", "/llm/anthropic/v1/messages", msgBody},
		{"decide", "/decide/v1/systemone", `{"model":"m","state":null,"questions":{"q":{"type":"noul","instructions":"Yes?","criteria":{}}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, up := setup(t, nil)
			var seen []string // the keys the upstream was called with
			up.setRule(func(entry, path string, body []byte) *answer {
				seen = append(seen, keys[entry])
				all := strings.Join(seen, " ")
				if entry == first {
					return &answer{status: 429, header: http.Header{"Retry-After": {"1"}}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`}
				}
				text := all
				if bytes.Contains(body, []byte(`"output_config"`)) { // decide's
					text = strings.ReplaceAll(`{"reason":"`+all+`","noul":0.5}`, `"`, `\"`)
				}
				return &answer{status: 200, header: http.Header{"X-Seen": {all}}, body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` + text + `"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`}
			})
			tok := b.AddBox("alpha")
			b.Report(tok, brokertest.Entry("inference", "agent", "decide"))
			resp := b.Do("POST", tt.path, tok, []byte(tt.body), http.Header{"Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}})
			if calls := up.took(); len(calls) < 2 || calls[0].entry != first {
				t.Fatalf("upstream took %d calls, want the first on %s, refused, then another", len(calls), first)
			}
			var h bytes.Buffer
			_ = resp.Header.Write(&h)
			for name, k := range keys {
				if bytes.Contains(resp.Body, []byte(k)) || strings.Contains(h.String(), k) {
					t.Errorf("POST %s = %d, the answer carries entry %s's key: %s %v", tt.path, resp.StatusCode, name, resp.Body, resp.Header)
				}
			}
			if resp.StatusCode != 200 {
				t.Errorf("POST %s = %d %s, want 200", tt.path, resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestPool_TokenNeverReachesTheUpstreamOnTheRetry: the call made again on
// the next entry after a refusal carries the box's token no more than the
// first did: not in a header, the query or the body it is made with.
func TestPool_TokenNeverReachesTheUpstreamOnTheRetry(t *testing.T) {
	b, up := setup(t, nil)
	first := order("alpha")[0]
	up.set(first, &answer{status: 429, header: http.Header{"Retry-After": {"1"}}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`})
	tok := box(t, b, "alpha")
	body := `{"model":"claude-sonnet-4-5","max_tokens":5,"metadata":{"user_id":"` + tok + `"},"messages":[{"role":"user","content":"hi"}]}`
	resp := b.Do("POST", "/llm/anthropic/v1/messages?k="+tok, tok, []byte(body), http.Header{"Anthropic-Version": {"2023-06-01"}, "X-Custom": {tok}, "Anthropic-Beta": {tok}})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s, want the next entry's answer", resp.StatusCode, resp.Body)
	}
	calls := up.took()
	if len(calls) != 2 {
		t.Fatalf("upstream took %d calls, want 2", len(calls))
	}
	for i, c := range calls {
		var h bytes.Buffer
		_ = c.header.Write(&h)
		if bytes.Contains(c.body, []byte(tok)) || strings.Contains(h.String(), tok) || strings.Contains(c.query, tok) {
			t.Errorf("call %d on %s carries the token: %s ?%s %s", i, c.entry, h.String(), c.query, c.body)
		}
		if !strings.HasPrefix(c.header.Get("X-Custom"), "[token-removed") {
			t.Errorf("call %d on %s: X-Custom %q, want the marker in the token's place", i, c.entry, c.header.Get("X-Custom"))
		}
	}
}

// TestPool_AProbeAnsweredWithTheKeyNeverLogsIt: an upstream that answers
// a call 401 and the broker's own probe with the key it was sent as its
// status line makes Go's transport fail the probe with an error that
// quotes the key; the log line of the failed probe holds no entry's key.
func TestPool_AProbeAnsweredWithTheKeyNeverLogsIt(t *testing.T) {
	var logs brokertest.Buffer
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "%s\r\n\r\n", r.Header.Get("X-Api-Key"))
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: up, Logs: &logs})
	b.SetCredential(pool.SharedID, keys[pool.Default])
	setEntry(t, b, "second", 1)
	setEntry(t, b, "third", 1)
	if resp := messages(t, b, box(t, b, "mallory"), []byte(msgBody)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("mallory got %d %s, want the 401", resp.StatusCode, resp.Body)
	}
	text := logs.String()
	if !strings.Contains(text, "its probe failed") {
		t.Fatalf("no probe failed, so this test shows nothing:\n%s", text)
	}
	for name, key := range keys {
		if strings.Contains(text, key) {
			t.Errorf("the log holds entry %s's key:\n%s", name, text)
		}
	}
}
