package server_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// readOnly, beneath the store's deadline where its driver is, while on
// is set, answers every read and refuses every write, as SQLite refuses
// them once its files are made immutable ("attempt to write a readonly
// database") and a read-only PostgreSQL does.
type readOnly struct {
	readOnly atomic.Bool
}

var errReadOnly = fmt.Errorf("%w: attempt to write a readonly database (8) (test)", store.ErrUnavailable)

// around is readOnly around each of the store driver's operations.
func (s *readOnly) around(ctx context.Context, op deadline.Op, call func(context.Context) error) error {
	if op.Kind == deadline.Write && s.readOnly.Load() {
		return errReadOnly
	}
	return call(ctx)
}

// newReadOnlyBroker starts a broker on SQLite with a readOnly beneath its
// store deadline, with a box "alpha" that may call inference, and
// returns its token.
func newReadOnlyBroker(t *testing.T) (*brokertest.Broker, *readOnly, *logBuffer, string) {
	t.Helper()
	ro := &readOnly{}
	logs := &logBuffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) { c.StoreDeadline = 100 * time.Millisecond },
		ServerOptions: func(o *server.Options) { o.StoreAround = ro.around }})
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	return b, ro, logs, tok
}

func call(b *brokertest.Broker, tok string) brokertest.Response {
	return b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), http.Header{"Content-Type": {"application/json"}})
}

// TestReadyz_StoreWritesRefused: a store that answers every read and
// refuses every write. The bound held: calls are answered 200 and their
// records spooled, and /readyz is 503 naming "storeWrites" and the
// store's refusal (its reads still "ok"); once the store takes writes
// again, /readyz is 200. On the code before, /readyz stayed 200, as its
// store check was a read. Bounded by a 100 ms store deadline; about a
// second.
func TestReadyz_StoreWritesRefused(t *testing.T) {
	b, ro, _, tok := newReadOnlyBroker(t)
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 200 {
		t.Fatalf("readyz before = %d %s, want 200", r.StatusCode, r.Body)
	}
	ro.readOnly.Store(true)
	if r := call(b, tok); r.StatusCode != 200 {
		t.Fatalf("a call while writes are refused = %d %s, want 200 (recorded in the spool)", r.StatusCode, r.Body)
	}
	if err := b.Server.Audit.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Server.Outbox.Flush(t.Context())
	// The box-facing /readyz says that the writes fail, never the
	// store's own words (which can name its host, user and database);
	// the admin API's says why.
	r := b.Do("GET", "/readyz", "", nil, nil)
	if r.StatusCode != 503 || !strings.Contains(string(r.Body), `"storeWrites":"failing"`) ||
		strings.Contains(string(r.Body), "readonly") || !strings.Contains(string(r.Body), `"store":"ok"`) {
		t.Errorf("readyz while writes are refused = %d %s, want 503 naming storeWrites but not why, the store's reads ok", r.StatusCode, r.Body)
	}
	if r := b.Admin("GET", "/readyz", "", nil); r.StatusCode != 503 || !strings.Contains(string(r.Body), `"storeWrites": "failing: since `) ||
		!strings.Contains(string(r.Body), "attempt to write a readonly database") || !strings.Contains(string(r.Body), `"store": "ok"`) {
		t.Errorf("admin readyz while writes are refused = %d %s, want 503 naming storeWrites and why, the store's reads ok", r.StatusCode, r.Body)
	}
	ro.readOnly.Store(false)
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 200 {
		t.Errorf("readyz once writes are taken again = %d %s, want 200", r.StatusCode, r.Body)
	}
}

// TestOutageLog_WritesRefusedReadsAnswer: for 2 s a store answers every
// read and refuses every write while a box calls, and the cache reads
// the change log every 100 ms. Once, each read that answered ended the
// outage and the next write began another (58-72 pairs of lines in 5 s).
// The bound held: exactly one line as the outage begins (writes), none
// saying reads fail and no end while writes fail; and exactly one end
// line once writes are taken again, naming what failed. Bounded by the
// 2 s run and a 5 s wait for the end.
func TestOutageLog_WritesRefusedReadsAnswer(t *testing.T) {
	b, ro, logs, tok := newReadOnlyBroker(t)
	ro.readOnly.Store(true)
	calls := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if r := call(b, tok); r.StatusCode != 200 {
			t.Fatalf("a call while writes are refused = %d %s", r.StatusCode, r.Body)
		}
		calls++
		time.Sleep(20 * time.Millisecond)
	}
	begins, reads, ends := logs.lines(deadline.MsgNoWrites), logs.lines(deadline.MsgNotAnswering), logs.lines(deadline.MsgAnswering)
	t.Logf("2 s of %d calls with writes refused: %d begin lines (writes), %d saying reads fail, %d end lines", calls, len(begins), len(reads), len(ends))
	if len(begins) != 1 || len(reads) != 0 || len(ends) != 0 {
		t.Errorf("outage lines while writes are refused: %d begin, %d reads-fail, %d end; want 1, 0, 0", len(begins), len(reads), len(ends))
	}
	ro.readOnly.Store(false)
	for until := time.Now().Add(5 * time.Second); len(logs.lines(deadline.MsgAnswering)) == 0; {
		if time.Now().After(until) {
			t.Fatal("no end line within 5 s of writes being taken again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := call(b, tok); r.StatusCode != 200 {
		t.Fatalf("a call after = %d %s", r.StatusCode, r.Body)
	}
	ends = logs.lines(deadline.MsgAnswering)
	if n := len(logs.lines(deadline.MsgNoWrites)); n != 1 || len(ends) != 1 {
		t.Fatalf("after writes are taken again: %d begin lines and %d end lines, want 1 and 1", n, len(ends))
	}
	if ends[0]["failed"] != "writes" || ends[0]["level"] != "WARN" {
		t.Errorf("end line %v, want a WARN naming writes as what failed", ends[0])
	}
}

// TestSpool_RefusedSettlementDoesNotHoldAnotherBoxsCalls: the fault as an
// operator met it. Box alpha's usage kept is near SQLite's INTEGER bound,
// so that the settlement of its next call is refused for good ("cannot
// store REAL value in INTEGER column"); it is answered during a write
// outage, and 20 calls of box beta after it. The bound held: once the
// store takes writes again, one replay keeps all 20 of beta's calls (usage
// and audit entries) and sets alpha's settlement aside as a dead letter,
// which /readyz counts. On the code before, the replay stopped at alpha's
// batch at every try and none of beta's 20 calls was kept. Bounded by a
// 100 ms store deadline; about a second.
func TestSpool_RefusedSettlementDoesNotHoldAnotherBoxsCalls(t *testing.T) {
	const calls = 20
	b, fz, _ := newFrozenBroker(t, 100*time.Millisecond)
	b.SetCredential("anthropic", "sk-ant-api03-x")
	alpha, beta := b.AddBox("alpha"), b.AddBox("beta")
	b.Report(alpha, brokertest.Entry("inference", "agent"))
	b.Report(beta, brokertest.Entry("inference", "agent"))
	raw := b.Server.Store
	ctx := t.Context()
	month := time.Now().UTC().Format("2006-01")

	if r := call(b, alpha); r.StatusCode != 200 {
		t.Fatalf("alpha's first call = %d %s", r.StatusCode, r.Body)
	}
	b.Server.Outbox.Flush(ctx)
	u, err := raw.ListUsage(ctx, "alpha", month)
	if err != nil || len(u) != 1 {
		t.Fatalf("alpha's usage = %+v, %v; want one row", u, err)
	}
	near := u[0]
	near.Calls, near.InputTokens, near.OutputTokens, near.CacheWriteTokens, near.CacheReadTokens, near.Cost, near.Unpriced, near.Unmeasured =
		0, math.MaxInt64-u[0].InputTokens, 0, 0, 0, 0, 0, 0
	if err := raw.Settle(ctx, store.Settlement{Box: "alpha", Month: month, Usage: []store.Usage{near}}); err != nil {
		t.Fatal(err)
	}

	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := raw.ListAudit(ctx, store.AuditQuery{Box: "beta", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	fz.refuse.Store(true) // the store takes no write
	answered := 0
	if r := call(b, alpha); r.StatusCode == 200 {
		answered++
	}
	b.Server.Outbox.Flush(ctx) // alpha's settlement is spooled first
	for range calls {
		if r := call(b, beta); r.StatusCode == 200 {
			answered++
		}
	}
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	b.Server.Outbox.Flush(ctx)
	fz.refuse.Store(false)
	if _, err := b.Server.Replay(ctx); err != nil {
		t.Logf("replay: %v", err)
	}
	kept, err := raw.ListUsage(ctx, "beta", month)
	if err != nil {
		t.Fatal(err)
	}
	keptCalls := int64(0)
	for _, r := range kept {
		keptCalls += r.Calls
	}
	all, err := raw.ListAudit(ctx, store.AuditQuery{Box: "beta", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	entries := all[:len(all)-len(before)]
	dead := b.Server.Spool.DeadCount()
	t.Logf("calls answered 200: %d (alpha 1, beta %d); beta's kept after the replay: %d calls of usage, %d audit entries; dead letters %d; spool %d bytes",
		answered, calls, keptCalls, len(entries), dead, b.Server.Spool.Size())
	if answered != calls+1 {
		t.Errorf("answered %d calls 200, want %d", answered, calls+1)
	}
	if keptCalls != calls || len(entries) != calls {
		t.Errorf("beta's records kept: %d calls of usage and %d audit entries, want %d of each", keptCalls, len(entries), calls)
	}
	if dead != 1 {
		t.Errorf("dead letters = %d, want 1 (alpha's settlement)", dead)
	}
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 200 || !strings.Contains(string(r.Body), `"deadLetters":1`) {
		t.Errorf("readyz = %d %s, want 200 counting the dead letter", r.StatusCode, r.Body)
	}
}
