package server_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// readOnlyStore is a store that, while readOnly is set, answers every
// read and refuses every write the broker makes while serving, as SQLite
// refuses them once its files are made immutable ("attempt to write a
// readonly database") and a read-only PostgreSQL does.
type readOnlyStore struct {
	store.Store
	readOnly atomic.Bool
}

var errReadOnly = fmt.Errorf("%w: attempt to write a readonly database (8) (test)", store.ErrUnavailable)

func (s *readOnlyStore) refuse() error {
	if s.readOnly.Load() {
		return errReadOnly
	}
	return nil
}

func (s *readOnlyStore) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	if err := s.refuse(); err != nil {
		return false, err
	}
	return s.Store.ApplySpooled(ctx, key, settle, audit)
}

func (s *readOnlyStore) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	if err := s.refuse(); err != nil {
		return err
	}
	return s.Store.AddAudit(ctx, entries)
}

func (s *readOnlyStore) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	if err := s.refuse(); err != nil {
		return 0, err
	}
	return s.Store.PruneAudit(ctx, before)
}

func (s *readOnlyStore) Settle(ctx context.Context, st store.Settlement) error {
	if err := s.refuse(); err != nil {
		return err
	}
	return s.Store.Settle(ctx, st)
}

func (s *readOnlyStore) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	if err := s.refuse(); err != nil {
		return 0, err
	}
	return s.Store.Reserve(ctx, r)
}

func (s *readOnlyStore) RenewReservations(ctx context.Context, ids []int64, at time.Time) error {
	if err := s.refuse(); err != nil {
		return err
	}
	return s.Store.RenewReservations(ctx, ids, at)
}

func (s *readOnlyStore) ReleaseStale(ctx context.Context, before time.Time) (int, error) {
	if err := s.refuse(); err != nil {
		return 0, err
	}
	return s.Store.ReleaseStale(ctx, before)
}

// newReadOnlyBroker starts a broker on SQLite behind a readOnlyStore,
// with a box "alpha" that may call inference, and returns its token.
func newReadOnlyBroker(t *testing.T) (*brokertest.Broker, *readOnlyStore, *logBuffer, string) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	ro := &readOnlyStore{Store: st}
	logs := &logBuffer{}
	b := brokertest.New(t, brokertest.Options{Store: ro, Logs: logs, Config: func(c *server.Config) { c.StoreDeadline = 100 * time.Millisecond }})
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
	r := b.Do("GET", "/readyz", "", nil, nil)
	if r.StatusCode != 503 || !strings.Contains(string(r.Body), `"storeWrites":"failing: since `) ||
		!strings.Contains(string(r.Body), "attempt to write a readonly database") || !strings.Contains(string(r.Body), `"store":"ok"`) {
		t.Errorf("readyz while writes are refused = %d %s, want 503 naming storeWrites and why, the store's reads ok", r.StatusCode, r.Body)
	}
	if r := b.Admin("GET", "/readyz", "", nil); r.StatusCode != 503 {
		t.Errorf("admin readyz while writes are refused = %d %s, want 503", r.StatusCode, r.Body)
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
