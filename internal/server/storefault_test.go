package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/token"
)

// freezer, beneath the store's deadline where its driver is, once
// frozen, answers nothing until it is thawed, whatever its callers'
// contexts say: a PostgreSQL server stopped with SIGSTOP, or one behind a
// link that drops every packet, as the broker sees it.
type freezer struct {
	mu   sync.Mutex
	gate chan struct{} // nil while thawed; closed on thaw
	// refuse, while set, makes every statement that adds or changes rows
	// (INSERT, UPDATE) fail at once with store.ErrUnavailable, as a
	// store on a full disk does: one that deletes nothing (the readiness
	// check's write) is still taken.
	refuse atomic.Bool
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate == nil {
		f.gate = make(chan struct{})
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

// wait blocks while the store is frozen; it ignores every context.
func (f *freezer) wait() {
	f.mu.Lock()
	g := f.gate
	f.mu.Unlock()
	if g != nil {
		<-g
	}
}

var errRefused = fmt.Errorf("%w: connection refused (test)", store.ErrUnavailable)

// around is the freezer around each of the store driver's operations.
func (f *freezer) around(ctx context.Context, op deadline.Op, call func(context.Context) error) error {
	f.wait()
	if q := strings.ToUpper(strings.TrimSpace(op.Query)); f.refuse.Load() && (strings.HasPrefix(q, "INSERT") || strings.HasPrefix(q, "UPDATE")) {
		return errRefused
	}
	return call(ctx)
}

// logBuffer is a log destination safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the logged lines whose msg is msg, decoded.
func (l *logBuffer) lines(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// newFrozenBroker starts a broker on SQLite with a freezer beneath its
// store deadline of d.
func newFrozenBroker(t *testing.T, d time.Duration, more ...func(*brokertest.Options)) (*brokertest.Broker, *freezer, *logBuffer) {
	t.Helper()
	fz := &freezer{}
	t.Cleanup(fz.thaw) // before the broker closes the store
	logs := &logBuffer{}
	opt := brokertest.Options{Logs: logs, Config: func(c *server.Config) { c.StoreDeadline = d },
		ServerOptions: func(o *server.Options) { o.StoreAround = fz.around }}
	for _, f := range more {
		f(&opt)
	}
	b := brokertest.New(t, opt)
	return b, fz, logs
}

// TestStoreFrozen_AnsweredWithin503: a store that stops answering without
// refusing (a frozen PostgreSQL, a link that drops packets) leaves no
// request hanging. The bound held: every request that needs the store is
// answered 503 in the refusal shape with Retry-After, while the store
// never answers; the client gives up only after 20 s, 200 times the
// 100 ms deadline, and the test logs the slowest answer. On the code
// before the deadline every request hung until the thaw.
func TestStoreFrozen_Answered503(t *testing.T) {
	const deadline = 100 * time.Millisecond
	b, fz, logs := newFrozenBroker(t, deadline)
	b.Client.Timeout = 20 * time.Second
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 200 {
		t.Fatalf("readyz before the freeze = %d %s, want 200", r.StatusCode, r.Body)
	}
	fz.freeze()
	// Tokens no cache has seen: each is looked up in the store.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, _ := token.NewBox()
			start := time.Now()
			req, _ := http.NewRequest("GET", b.URL+"/llm/anthropic/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := b.Client.Do(req)
			if err != nil {
				t.Errorf("request while the store is frozen: %v (hung)", err)
				return
			}
			defer resp.Body.Close()
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			took := time.Since(start)
			mu.Lock()
			slowest = max(slowest, took)
			mu.Unlock()
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
				t.Errorf("request while the store is frozen = %d (Retry-After %q) %s, want 503 with Retry-After",
					resp.StatusCode, resp.Header.Get("Retry-After"), body.Bytes())
			}
			if typ, _ := brokertest.Refusal(body.Bytes()); typ != "api_error" {
				t.Errorf("503 body %s is not the refusal shape", body.Bytes())
			}
		}()
	}
	wg.Wait()
	t.Logf("slowest 503 with the store frozen: %s (deadline %s)", slowest.Round(time.Millisecond), deadline)

	// The readiness check fails within its bound, on both listeners.
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 503 || !strings.Contains(string(r.Body), `"store":"unavailable"`) {
		t.Errorf("box-side readyz with the store frozen = %d %s, want 503 naming the store", r.StatusCode, r.Body)
	}
	if r := b.Admin("GET", "/readyz", "", nil); r.StatusCode != 503 {
		t.Errorf("admin readyz with the store frozen = %d %s, want 503", r.StatusCode, r.Body)
	}
	if n := len(logs.lines("store: not answering; requests that need it get 503 until it does")); n != 1 {
		t.Errorf("outage start logged %d times, want once", n)
	}

	fz.thaw()
	// The first store call that answers ends the outage; readyz is one.
	for i := 0; ; i++ {
		r := b.Do("GET", "/readyz", "", nil, nil)
		if r.StatusCode == 200 {
			break
		}
		if i == 1000 {
			t.Fatalf("readyz after the thaw = %d %s", r.StatusCode, r.Body)
		}
	}
	tok, _ := token.NewBox()
	if r := b.Do("GET", "/llm/anthropic/v1/models", tok, nil, nil); r.StatusCode != 403 {
		t.Errorf("unknown token after the thaw = %d %s, want 403", r.StatusCode, r.Body)
	}
	// One end a start: on a loaded machine a store call after the thaw
	// can itself outlast the 100 ms deadline, an outage of its own that
	// starts and ends again; an end is never logged without its start.
	ends := logs.lines("store: answering again")
	if starts := logs.lines("store: not answering; requests that need it get 503 until it does"); len(ends) == 0 || len(ends) > len(starts) {
		t.Fatalf("outage end logged %d times for %d starts, want once a start", len(ends), len(starts))
	}
	if ends[0]["level"] != "WARN" || ends[0]["since"] == nil || ends[0]["until"] == nil || ends[0]["outage"] == nil {
		t.Errorf("outage end line %v, want a WARN with since, until and outage", ends[0])
	}
}

// TestStoreDown_AnsweredCallsSpooledAndReplayed: calls answered 200 while
// the store refuses every write leave their spend and audit rows all the
// same. The bound held: after the store answers again, the usage kept
// counts exactly the calls answered 200, and the audit log holds exactly
// one entry for each; on the code before the spool both were lost.
func TestStoreDown_AnsweredCallsSpooledAndReplayed(t *testing.T) {
	const calls = 12
	arrived := make(chan struct{}, calls)
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		brokertest.AnthropicStandIn(w, r)
	})
	b, fz, _ := newFrozenBroker(t, 100*time.Millisecond, func(o *brokertest.Options) { o.Anthropic = up })
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	raw := b.Server.Store
	auditBefore, _ := raw.ListAudit(t.Context(), store.AuditQuery{Box: "alpha", Limit: 1000})

	var wg sync.WaitGroup
	var ok atomic.Int64
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), http.Header{"Content-Type": {"application/json"}})
			if r.StatusCode == 200 {
				ok.Add(1)
			} else {
				t.Errorf("call = %d %s", r.StatusCode, r.Body)
			}
		}()
	}
	for range calls {
		<-arrived // every call is past the store's reads, at the upstream
	}
	fz.refuse.Store(true) // and now the store takes no write
	close(release)
	wg.Wait()
	// What the answered calls left is written now (and fails): the
	// audit queue, and the settlements batched.
	if err := b.Server.Audit.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Server.Outbox.Flush(t.Context())
	if b.Server.Spool.Size() == 0 {
		t.Fatal("nothing spooled while the store refused every write")
	}
	if u, _ := raw.ListUsage(t.Context(), "alpha", time.Now().UTC().Format("2006-01")); len(u) != 0 {
		t.Fatalf("usage %+v reached a store that refused every write", u)
	}

	fz.refuse.Store(false)
	// The replay runs every second while the spool holds anything; this
	// one waits for any that has begun.
	if _, err := b.Server.Replay(t.Context()); err != nil {
		t.Fatalf("replay once the store answers: %v", err)
	}
	if n := b.Server.Spool.Size(); n != 0 {
		t.Errorf("spool holds %d bytes after the replay, want none", n)
	}
	u, err := raw.ListUsage(t.Context(), "alpha", time.Now().UTC().Format("2006-01"))
	if err != nil {
		t.Fatal(err)
	}
	var calledUp int64
	for _, x := range u {
		calledUp += x.Calls
	}
	if calledUp != ok.Load() || ok.Load() != calls {
		t.Errorf("usage counts %d calls, %d answered 200 (of %d)", calledUp, ok.Load(), calls)
	}
	entries, err := raw.ListAudit(t.Context(), store.AuditQuery{Box: "alpha", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	for _, e := range entries[:len(entries)-len(auditBefore)] {
		if e.Route != "" && e.Status == 200 && e.Capability == "inference" {
			served++
		}
	}
	if served != calls {
		t.Errorf("audit log holds %d inference entries answered 200, want %d", served, calls)
	}
}

// TestCannotRecord_FailsClosed: when a call's audit record can be
// written neither to the store (it refuses every write, as a SQLite on
// a full disk does) nor to the spool (here a directory stands where its
// file would be), the next call is refused 503 without reaching the
// upstream, and /readyz fails; --audit-required=false serves it instead.
// Once a write succeeds again, calls are served.
func TestCannotRecord_FailsClosed(t *testing.T) {
	for _, optional := range []bool{false, true} {
		t.Run(fmt.Sprintf("audit optional %v", optional), func(t *testing.T) {
			b, fz, _ := newFrozenBroker(t, time.Second, func(o *brokertest.Options) {
				prev := o.Config
				o.Config = func(c *server.Config) { prev(c); c.AuditOptional = optional }
			})
			b.SetCredential("anthropic", "sk-ant-api03-x")
			tok := b.AddBox("alpha")
			b.Report(tok, brokertest.Entry("inference", "agent"))
			hdr := http.Header{"Content-Type": {"application/json"}}
			spoolPath := filepath.Join(b.Server.Config.DataDir, "spool.jsonl")
			if err := os.Mkdir(spoolPath, 0o700); err != nil {
				t.Fatal(err)
			}
			fz.refuse.Store(true)
			if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr); r.StatusCode != 200 {
				t.Fatalf("call before any write failed = %d %s", r.StatusCode, r.Body)
			}
			if err := b.Server.Audit.Sync(t.Context()); err != nil { // its record is lost
				t.Fatal(err)
			}
			upstream := len(b.Upstream.Seen())
			r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr)
			ready := b.Do("GET", "/readyz", "", nil, nil)
			if optional {
				if r.StatusCode != 200 || ready.StatusCode != 200 {
					t.Errorf("with the audit optional: call = %d, readyz = %d %s; want both 200", r.StatusCode, ready.StatusCode, ready.Body)
				}
				return
			}
			if _, msg := brokertest.Refusal(r.Body); r.StatusCode != 503 || !strings.Contains(msg, "cannot record") || r.Header.Get("Retry-After") == "" {
				t.Errorf("call that cannot be recorded = %d (Retry-After %q) %s, want 503 saying the broker cannot record", r.StatusCode, r.Header.Get("Retry-After"), r.Body)
			}
			if n := len(b.Upstream.Seen()); n != upstream {
				t.Errorf("the refused call reached the upstream")
			}
			if ready.StatusCode != 503 || !strings.Contains(string(ready.Body), `"record":"cannot record"`) {
				t.Errorf("readyz that cannot record = %d %s, want 503 naming the record", ready.StatusCode, ready.Body)
			}
			// The refusal's own record was queued before its answer came;
			// the audit writer may have tried it already, or not. Have it
			// try now, while the disk still refuses, so that what follows
			// does not depend on which.
			if err := b.Server.Audit.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			// The disk takes writes again: the next call's record (the
			// call is refused, as no write has succeeded since) is
			// written, and calls are served.
			fz.refuse.Store(false)
			if err := os.Remove(spoolPath); err != nil {
				t.Fatal(err)
			}
			b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr)
			if err := b.Server.Audit.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr); r.StatusCode != 200 {
				t.Errorf("call once writes succeed = %d %s, want 200", r.StatusCode, r.Body)
			}
		})
	}
}
