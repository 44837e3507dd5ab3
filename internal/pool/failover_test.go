package pool_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// The three keys of the stand-in upstream, by entry name.
var keys = map[string]string{
	pool.Default: "sk-ant-api03-POOL-KEY-DEFAULT-0000",
	"second":     "sk-ant-api03-POOL-KEY-SECOND-1111",
	"third":      "sk-ant-api03-POOL-KEY-THIRD-22222",
}

// entryOf names the entry whose key a request carried.
func entryOf(r *http.Request) string {
	for name, k := range keys {
		if r.Header.Get("X-Api-Key") == k {
			return name
		}
	}
	return "?"
}

// answer is how one key answers: status, header and body; a nil answer
// is the stand-in's ordinary 200.
type answer struct {
	status int
	header http.Header
	body   string
}

// upstream is a stand-in Anthropic API with three keys, each of which
// answers as told, and a record of which key each call came on and what
// body it carried. An answer set for a key and path (at) is given before
// one set for the key (set); rule, when set, is asked before both.
// before, when set, is called first, outside the lock: a test's barrier.
type upstream struct {
	before  func(entry, path string)
	mu      sync.Mutex // guards below
	answers map[string]*answer
	at      map[string]*answer // by entry + " " + path
	rule    func(entry, path string, body []byte) *answer
	calls   []call
}

type call struct {
	entry        string
	method, path string
	body         []byte
	header       http.Header
	query        string
}

func (u *upstream) set(entry string, a *answer) {
	u.mu.Lock()
	u.answers[entry] = a
	u.mu.Unlock()
}

// setAt sets how entry's key answers calls to path alone.
func (u *upstream) setAt(entry, path string, a *answer) {
	u.mu.Lock()
	if u.at == nil {
		u.at = map[string]*answer{}
	}
	u.at[entry+" "+path] = a
	u.mu.Unlock()
}

func (u *upstream) setRule(rule func(entry, path string, body []byte) *answer) {
	u.mu.Lock()
	u.rule = rule
	u.mu.Unlock()
}

// took returns the calls a box made, the broker's own probes of a key
// (GET /v1/models) left out.
func (u *upstream) took() []call {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []call
	for _, c := range u.calls {
		if !c.probe() {
			out = append(out, c)
		}
	}
	return out
}

// probes returns the broker's own GET /v1/models calls, by entry.
func (u *upstream) probes() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, c := range u.calls {
		if c.probe() {
			out = append(out, c.entry)
		}
	}
	return out
}

func (c call) probe() bool { return c.method == http.MethodGet && c.path == "/v1/models" }

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e := entryOf(r)
	if u.before != nil {
		u.before(e, r.URL.Path)
	}
	u.mu.Lock()
	u.calls = append(u.calls, call{entry: e, method: r.Method, path: r.URL.Path, body: body, header: r.Header.Clone(), query: r.URL.RawQuery})
	var a *answer
	if u.rule != nil {
		a = u.rule(e, r.URL.Path, body)
	}
	if a == nil {
		a = u.at[e+" "+r.URL.Path]
	}
	if a == nil {
		a = u.answers[e]
	}
	u.mu.Unlock()
	if a != nil {
		for k, vs := range a.header {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v1/models" {
		_, _ = io.WriteString(w, `{"data":[{"type":"model","id":"claude-sonnet-4-5"}],"has_more":false}`)
		return
	}
	fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"from %s"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`, e)
}

// setup starts a broker over a stand-in upstream whose pool has the three
// keys, the default one (the shared credential) and two named entries,
// each of weight 1.
func setup(t testing.TB, config func(*server.Config)) (*brokertest.Broker, *upstream) {
	t.Helper()
	up := &upstream{answers: map[string]*answer{}}
	b := brokertest.New(t, brokertest.Options{Anthropic: up, Config: config})
	b.SetCredential(pool.SharedID, keys[pool.Default])
	setEntry(t, b, "second", 1)
	setEntry(t, b, "third", 1)
	return b, up
}

func setEntry(t testing.TB, b *brokertest.Broker, name string, weight int) {
	t.Helper()
	sealed, err := b.Server.Keyring.Seal([]byte(keys[name]), pool.AD(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: name, Weight: weight, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		t.Fatalf("SetPoolEntry(%s) = %v", name, err)
	}
	b.Server.Cache.Drop(store.ChangePool, name)
}

// order is box's order over the three entries of weight 1.
func order(box string) []string {
	return pool.Order(box, []pool.Entry{{Name: pool.Default, Weight: 1}, {Name: "second", Weight: 1}, {Name: "third", Weight: 1}})
}

func box(t *testing.T, b *brokertest.Broker, name string) string {
	t.Helper()
	tok := b.AddBox(name)
	b.Report(tok, brokertest.Entry("inference", "agent"))
	return tok
}

const msgBody = `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

func messages(t *testing.T, b *brokertest.Broker, tok string, body []byte) brokertest.Response {
	t.Helper()
	return b.Do("POST", "/llm/anthropic/v1/messages", tok, body, http.Header{"Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}})
}

func TestPool_OneBoxKeepsOneKey(t *testing.T) {
	b, up := setup(t, nil)
	tok := box(t, b, "alpha")
	for i := 0; i < 100; i++ {
		if resp := messages(t, b, tok, []byte(msgBody)); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	want := order("alpha")[0]
	for i, c := range up.took() {
		if c.entry != want {
			t.Fatalf("call %d went to entry %s, want every call on %s", i, c.entry, want)
		}
	}
	if n := len(up.took()); n != 100 {
		t.Errorf("upstream saw %d calls, want 100", n)
	}
}

func TestPool_FailsOverBeforeTheBoxSeesARefusal(t *testing.T) {
	// state is the refusing entry's state for every box after one box's
	// refusal, and skipped whether the box's next call passes it by.
	tests := []struct {
		name    string
		answer  answer
		state   string
		skipped bool
	}{
		{"429", answer{status: 429, header: http.Header{"Retry-After": {"30"}}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`}, pool.StateHealthy, true},
		{"529", answer{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, pool.StateHealthy, true},
		{"500 overloaded_error", answer{status: 500, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, pool.StateHealthy, true},
		{"401", answer{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}, pool.StateFailed, true},
		{"403", answer{status: 403, body: `{"type":"error","error":{"type":"permission_error","message":"no"}}`}, pool.StateHealthy, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, up := setup(t, nil)
			tok := box(t, b, "alpha")
			first, second := order("alpha")[0], order("alpha")[1]
			a := tt.answer
			up.set(first, &a)
			body := []byte(msgBody)
			resp := messages(t, b, tok, body)
			if resp.StatusCode != 200 || !bytes.Contains(resp.Body, []byte("from "+second)) {
				t.Fatalf("the box got %d %s, want 200 from %s", resp.StatusCode, resp.Body, second)
			}
			if resp.Header.Get("Chant-Payer") != "shared" {
				t.Errorf("chant-payer = %q, want shared", resp.Header.Get("Chant-Payer"))
			}
			calls := up.took()
			if len(calls) != 2 || calls[0].entry != first || calls[1].entry != second {
				t.Fatalf("upstream calls %v, want one on %s then one on %s", calls, first, second)
			}
			if !bytes.Equal(calls[1].body, body) {
				t.Errorf("the retried call's body = %q, want the box's %q", calls[1].body, body)
			}
			// A cooling or failed entry takes no new call of the box:
			// the next goes straight to the second. A 403 is the
			// request's as much as the key's: the next call tries the
			// first again.
			if resp := messages(t, b, tok, body); resp.StatusCode != 200 {
				t.Fatalf("second call: %d %s", resp.StatusCode, resp.Body)
			}
			failovers := 1
			if calls := up.took(); tt.skipped && (len(calls) != 3 || calls[2].entry != second) {
				t.Errorf("the call after the refusal went to %v, want %s alone", calls[2:], second)
			} else if !tt.skipped {
				failovers = 2
				if len(calls) != 4 || calls[2].entry != first || calls[3].entry != second {
					t.Errorf("the call after the refusal went to %v, want %s then %s", calls[2:], first, second)
				}
			}
			// The audit log names the entry that paid: the second.
			if err := b.Server.Audit.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			es, err := b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Box: "alpha", Limit: 1})
			if err != nil || len(es) != 1 || es[0].PaidBy != second {
				t.Errorf("the audit log's last entry = %+v, %v; want one paid by %s", es, err, second)
			}
			metrics := b.Admin("GET", "/metrics", "", nil)
			for _, want := range []string{
				fmt.Sprintf(`boxbroker_pool_failovers_total{entry="%s"} %d`, first, failovers),
				`boxbroker_pool_entry_state{entry="` + first + `",state="` + tt.state + `"} 1`,
				`boxbroker_pool_requests_total{entry="` + second + `"} 2`,
			} {
				if !bytes.Contains(metrics.Body, []byte(want)) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			stat := statOf(t, b, first)
			if stat.State != tt.state {
				t.Errorf("entry %s state = %q, want %q", first, stat.State, tt.state)
			}
			if stat.Failovers != int64(failovers) {
				t.Errorf("entry %s failovers = %d, want %d", first, stat.Failovers, failovers)
			}
		})
	}
}

func statOf(t *testing.T, b *brokertest.Broker, name string) pool.Stat {
	t.Helper()
	resp := b.Admin("GET", "/api/credentials/pool", b.AdminToken, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/credentials/pool = %d %s", resp.StatusCode, resp.Body)
	}
	for _, k := range keys {
		if bytes.Contains(resp.Body, []byte(k)) {
			t.Fatalf("GET /api/credentials/pool shows a key: %s", resp.Body)
		}
	}
	var list struct {
		Entries []struct {
			Name, State           string
			Failovers, R429, R529 int64
		} `json:"entries"`
	}
	if err := jsonUnmarshal(resp.Body, &list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Entries {
		if e.Name == name {
			return pool.Stat{Name: e.Name, State: e.State, PoolCounts: metrics.PoolCounts{Failovers: e.Failovers, R429: e.R429, R529: e.R529}}
		}
	}
	t.Fatalf("no entry %s in %s", name, resp.Body)
	return pool.Stat{}
}

func TestPool_OtherStatusesAreNotRetried(t *testing.T) {
	for _, a := range []answer{
		{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`},
		{status: 500, body: `{"type":"error","error":{"type":"api_error","message":"oops"}}`},
		{status: 404, body: `{"type":"error","error":{"type":"not_found_error","message":"no"}}`},
	} {
		t.Run(fmt.Sprint(a.status), func(t *testing.T) {
			b, up := setup(t, nil)
			tok := box(t, b, "alpha")
			up.set(order("alpha")[0], &a)
			resp := messages(t, b, tok, []byte(msgBody))
			if resp.StatusCode != a.status || string(resp.Body) != a.body {
				t.Errorf("the box got %d %s, want the upstream's %d %s", resp.StatusCode, resp.Body, a.status, a.body)
			}
			if n := len(up.took()); n != 1 {
				t.Errorf("upstream saw %d calls, want 1", n)
			}
		})
	}
}

func TestPool_AllCoolingGivesTheUpstreamsOwnAnswer(t *testing.T) {
	b, up := setup(t, nil)
	tok := box(t, b, "alpha")
	for name := range keys {
		up.set(name, &answer{status: 429, header: http.Header{"Retry-After": {"17"}},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"key ` + name + ` is limited"}}`})
	}
	resp := messages(t, b, tok, []byte(msgBody))
	last := order("alpha")[2]
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "17" ||
		string(resp.Body) != `{"type":"error","error":{"type":"rate_limit_error","message":"key `+last+` is limited"}}` {
		t.Errorf("the box got %d retry-after %q %s, want the last entry's (%s) own 429", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Body, last)
	}
	if n := len(up.took()); n != 3 {
		t.Errorf("upstream saw %d calls, want 3 (one on each entry)", n)
	}
	// Every entry cools now: the next call goes once, to the box's own
	// entry, and its answer is the box's.
	resp = messages(t, b, tok, []byte(msgBody))
	calls := up.took()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "17" || len(calls) != 4 || calls[3].entry != order("alpha")[0] {
		t.Errorf("with every entry cooling the box got %d (calls %v), want one call on %s and its 429", resp.StatusCode, calls[3:], order("alpha")[0])
	}
}

func TestPool_BodyOverTheBoundIsNotRetried(t *testing.T) {
	b, up := setup(t, func(c *server.Config) { c.PoolRetryBody = 1024 })
	tok := box(t, b, "alpha")
	first := order("alpha")[0]
	up.set(first, &answer{status: 429, body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`})
	big := []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`)
	resp := messages(t, b, tok, big)
	if resp.StatusCode != 429 {
		t.Errorf("the box got %d %s, want the upstream's 429", resp.StatusCode, resp.Body)
	}
	calls := up.took()
	if len(calls) != 1 || !bytes.Equal(calls[0].body, big) {
		t.Errorf("upstream saw %d calls, want 1 with the whole body", len(calls))
	}
	// A body within the bound fails over.
	if resp := messages(t, b, tok, []byte(msgBody)); resp.StatusCode != 200 {
		t.Errorf("a small body got %d, want 200 from another entry", resp.StatusCode)
	}
}

func TestPool_NoRetryOnceTheAnswerStreams(t *testing.T) {
	var mu sync.Mutex
	var n int
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		n++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: stream})
	b.SetCredential(pool.SharedID, keys[pool.Default])
	setEntry(t, b, "second", 1)
	setEntry(t, b, "third", 1)
	tok := box(t, b, "alpha")
	resp := messages(t, b, tok, []byte(msgBody))
	if resp.StatusCode != 200 || !bytes.Contains(resp.Body, []byte("overloaded_error")) {
		t.Errorf("the box got %d %s, want the stream as it came, its error event included", resp.StatusCode, resp.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 1 {
		t.Errorf("upstream saw %d calls, want 1: nothing is retried once the answer streams", n)
	}
}

func TestPool_CountTokensFailsOver(t *testing.T) {
	b, up := setup(t, nil)
	tok := box(t, b, "alpha")
	up.set(order("alpha")[0], &answer{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`})
	resp := b.Do("POST", "/llm/anthropic/v1/messages/count_tokens", tok, []byte(msgBody), http.Header{"Anthropic-Version": {"2023-06-01"}})
	if resp.StatusCode != 200 {
		t.Errorf("count_tokens got %d %s, want 200 from the next entry", resp.StatusCode, resp.Body)
	}
	if calls := up.took(); len(calls) != 2 || calls[1].entry != order("alpha")[1] {
		t.Errorf("upstream calls %v, want the second on %s", calls, order("alpha")[1])
	}
}

func TestPool_DecideFailsOver(t *testing.T) {
	b, up := setup(t, nil)
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "decide"))
	first, second := order("alpha")[0], order("alpha")[1]
	up.set(first, &answer{status: 429, header: http.Header{"Retry-After": {"30"}}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`})
	resp := b.Do("POST", "/decide/v1/systemone", tok,
		[]byte(`{"model":"m","state":null,"questions":{"q":{"type":"noul","instructions":"Yes?","criteria":{}}}}`),
		http.Header{"Content-Type": {"application/json"}})
	if bytes.Contains(resp.Body, []byte("429")) {
		t.Errorf("decide answered %d %s, want the question asked again past the 429", resp.StatusCode, resp.Body)
	}
	calls := up.took()
	if len(calls) != 2 || calls[0].entry != first || calls[1].entry != second {
		t.Errorf("upstream calls %v, want one on %s then one on %s", calls, first, second)
	}
}

func TestPool_AFailedEntrySetAgainIsTriedAgain(t *testing.T) {
	b, up := setup(t, nil)
	tok := box(t, b, "alpha")
	first := order("alpha")[0]
	up.set(first, &answer{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`})
	if resp := messages(t, b, tok, []byte(msgBody)); resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, resp.Body)
	}
	up.set(first, nil)
	if first == pool.Default {
		b.SetCredential(pool.SharedID, keys[first])
	} else {
		setEntry(t, b, first, 1)
	}
	n := len(up.took())
	if resp := messages(t, b, tok, []byte(msgBody)); resp.StatusCode != 200 {
		t.Fatalf("call after the entry was set again: %d %s", resp.StatusCode, resp.Body)
	}
	if calls := up.took(); len(calls) != n+1 || calls[n].entry != first {
		t.Errorf("the call after %s was set again went to %v, want %s", first, calls[n:], first)
	}
}

func TestPool_SixtyBoxesSpreadByWeight(t *testing.T) {
	up := &upstream{answers: map[string]*answer{}}
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	b.SetCredential(pool.SharedID, keys[pool.Default])
	setEntry(t, b, "second", 2)
	setEntry(t, b, "third", 3)
	es := []pool.Entry{{Name: pool.Default, Weight: 1}, {Name: "second", Weight: 2}, {Name: "third", Weight: 3}}
	for i := 0; i < 60; i++ {
		name := fmt.Sprintf("box-%d", i)
		tok := box(t, b, name)
		for j := 0; j < 2; j++ {
			if resp := messages(t, b, tok, []byte(msgBody)); resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", name, resp.StatusCode, resp.Body)
			}
		}
		calls := up.took()
		if want := pool.Order(name, es)[0]; calls[len(calls)-1].entry != want || calls[len(calls)-2].entry != want {
			t.Errorf("%s's calls went to %v, want both on %s", name, calls[len(calls)-2:], want)
		}
	}
	got := map[string]int{}
	for _, c := range up.took() {
		got[c.entry]++
	}
	for _, e := range es {
		want := 120 * e.Weight / 6
		if d := got[e.Name] - want; d < -16 || d > 16 {
			t.Errorf("entry %s (weight %d) took %d of 120 calls from 60 boxes, want about %d", e.Name, e.Weight, got[e.Name], want)
		}
	}
	t.Logf("60 boxes over weights 1, 2, 3: %v calls (2 a box)", got)
}

// A hostile box sends a call that every entry refuses with 403 (as the
// API does for a model the organisation may not use). The box gets the
// upstream's own 403, and no entry is failed: one box cannot take the
// operator's keys away from every other box.
func TestPool_ABoxCannotFailEntriesWithItsOwnRefusals(t *testing.T) {
	b, up := setup(t, nil)
	tok := box(t, b, "mallory")
	refusal := answer{status: 403, body: `{"type":"error","error":{"type":"permission_error","message":"model not allowed"}}`}
	for _, name := range []string{pool.Default, "second", "third"} {
		a := refusal
		up.set(name, &a)
	}
	for i := 0; i < 3; i++ {
		resp := messages(t, b, tok, []byte(msgBody))
		if resp.StatusCode != 403 || !bytes.Contains(resp.Body, []byte("model not allowed")) {
			t.Fatalf("call %d: the box got %d %s, want the upstream's own 403", i, resp.StatusCode, resp.Body)
		}
	}
	for _, name := range []string{pool.Default, "second", "third"} {
		up.set(name, nil)
		if st := statOf(t, b, name); st.State != pool.StateHealthy {
			t.Errorf("entry %s is %q after one box's refused calls, want %q", name, st.State, pool.StateHealthy)
		}
	}
	// Another box's call goes to its own first entry, at once.
	other := box(t, b, "alice")
	n := len(up.took())
	if resp := messages(t, b, other, []byte(msgBody)); resp.StatusCode != 200 {
		t.Fatalf("alice: %d %s", resp.StatusCode, resp.Body)
	}
	if calls := up.took(); len(calls) != n+1 || calls[n].entry != order("alice")[0] {
		t.Errorf("alice's call went to %v, want %s alone", calls[n:], order("alice")[0])
	}
}

// TestPool_OneEntryOffersNoOther: a call on a pool of one entry (the
// shared credential alone) is counted and cooled as any other, and its
// Failover offers no other entry, whatever the model or the answer.
func TestPool_OneEntryOffersNoOther(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Anthropic: &upstream{answers: map[string]*answer{}}})
	b.SetCredential(pool.SharedID, keys[pool.Default])
	p := pool.New(pool.Config{Cache: b.Server.Cache, Keyring: b.Server.Keyring, Upstream: b.Server.Config.AnthropicURL})
	paid, err := p.Choose(t.Context(), "alpha", protocol.SharedPayer())
	if err != nil {
		t.Fatalf("Choose = %v", err)
	}
	fo := paid.Failover
	if paid.Entry != pool.Default || fo == nil {
		t.Fatalf("Choose = entry %q, failover %v; want %q with a failover", paid.Entry, fo, pool.Default)
	}
	if fo.Others() {
		t.Errorf("Others() = true with one entry")
	}
	if next, ok := fo.Model("claude-sonnet-4-5"); ok {
		t.Errorf("Model() moved to %q with one entry", next.Entry)
	}
	if !fo.Answered(http.StatusTooManyRequests, http.Header{}, nil) {
		t.Errorf("Answered(429) = false, want a refusal")
	}
	if next, ok := fo.Next(); ok {
		t.Errorf("Next() = %q with one entry", next.Entry)
	}
	stats, err := p.Health(t.Context())
	if err != nil || len(stats) != 1 {
		t.Fatalf("Health() = %v, %v; want one entry", stats, err)
	}
	if s := stats[0]; s.Requests != 1 || s.R429 != 1 || s.Failovers != 0 {
		t.Errorf("counts = %+v, want 1 request, 1 429, no failover", s.PoolCounts)
	}
}
