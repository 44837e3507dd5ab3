package outbox

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// keyStore applies batches as a store does, each key once, counting the
// audit entries and settlements applied.
type keyStore struct {
	store.Audit
	mu     sync.Mutex // guards keys, audit, settle
	keys   map[string]bool
	audit  int
	settle int
}

func (k *keyStore) ApplySpooled(_ context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string]bool{}
	}
	if k.keys[key] {
		return false, nil
	}
	k.keys[key] = true
	k.audit += len(audit)
	k.settle += len(settle)
	return true, nil
}

// TestOpen_RefusesTheRecordsOfAnotherStore: a data directory left with a
// journal and a spool of store A is refused by an outbox of store B,
// which says which store they belong to and where they are, and changes
// nothing; an outbox of store A then applies every record, once.
func TestOpen_RefusesTheRecordsOfAnotherStore(t *testing.T) {
	dir := t.TempDir()
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	first, err := Open(Config{Dir: dir, Store: &keyStore{}, Identity: a, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Spool.Append(Batch{Audit: []store.AuditEntry{{Route: "/spooled"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Journal.Audit(store.AuditEntry{Route: "/journaled"}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Journal.Call(nil, &store.Settlement{Box: "alpha", Charge: 1}); err != nil {
		t.Fatal(err)
	}
	journal := first.Journal.Path()
	first.Close() // as a kill would leave it: the journal's records not done

	before := snapshot(t, dir)
	_, err = Open(Config{Dir: dir, Store: &keyStore{}, Identity: b, Logger: quiet})
	var fe *ForeignError
	if !errors.As(err, &fe) {
		t.Fatalf("Open(store B) = %v, want a *ForeignError", err)
	}
	if fe.Theirs != a || fe.Ours != b || fe.Dir != dir {
		t.Errorf("ForeignError = %+v, want theirs %s, ours %s, dir %s", fe, a, b, dir)
	}
	spool := filepath.Join(dir, SpoolFile)
	for _, p := range []string{journal, spool} {
		if !slices.Contains(fe.Files, p) {
			t.Errorf("ForeignError.Files = %v, want %s among them", fe.Files, p)
		}
		if msg := err.Error(); !strings.Contains(msg, p) || !strings.Contains(msg, a) || !strings.Contains(msg, b) {
			t.Errorf("error %q does not name %s and both stores", msg, p)
		}
	}
	if after := snapshot(t, dir); !maps.Equal(before, after) {
		t.Errorf("the refused Open changed the directory: before %v, after %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}

	st := &keyStore{}
	again, err := Open(Config{Dir: dir, Store: st, Identity: a, Logger: quiet})
	if err != nil {
		t.Fatalf("Open(store A) = %v", err)
	}
	defer again.Close()
	if _, err := again.Replay(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st.audit != 2 || st.settle != 1 {
		t.Errorf("store A took %d audit entries and %d settlements, want 2 and 1", st.audit, st.settle)
	}
}

// TestReplay_StopsAtABatchOfAnotherStore: a batch in the spool that names
// another store (appended by a replica of that store sharing the
// directory) is not applied, and is kept with every batch after it.
func TestReplay_StopsAtABatchOfAnotherStore(t *testing.T) {
	dir := t.TempDir()
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	st := &keyStore{}
	o, err := Open(Config{Dir: dir, Store: st, Identity: a, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for _, bt := range []Batch{{Audit: []store.AuditEntry{{Route: "/a1"}}}, {Store: b, Audit: []store.AuditEntry{{Route: "/b"}}}, {Audit: []store.AuditEntry{{Route: "/a2"}}}} {
		if err := o.Spool.Append(bt); err != nil {
			t.Fatal(err)
		}
	}
	n, err := o.Replay(t.Context())
	var fe *ForeignError
	if n != 1 || !errors.As(err, &fe) || fe.Theirs != b {
		t.Fatalf("Replay = %d, %v; want 1 and a *ForeignError naming %s", n, err, b)
	}
	if st.audit != 1 {
		t.Errorf("store A took %d entries, want 1", st.audit)
	}
	if o.Spool.Size() == 0 {
		t.Errorf("the spool is empty: the batch of store B and the one after it are lost")
	}
}

// snapshot is the contents of every file in dir, by name.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

// TestOpen_RecoversIntoAFullSpool: the store was down for longer than the
// spool holds, and the replica stopped with records of answered calls in
// its journal that neither took. Once the store answers again, the next
// start hands those records to the store itself, under keys made from
// the journal, rather than refusing to start on a full spool (nothing
// replays the spool before serve runs); the spool is replayed after, and
// no record is applied twice, at this start or the next.
func TestOpen_RecoversIntoAFullSpool(t *testing.T) {
	dir := t.TempDir()
	const id = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	st := &keyStore{}
	cfg := Config{Dir: dir, Store: st, Identity: id, Logger: quiet, spoolMax: 4096}
	first, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spooled := 0
	for first.Spool.Append(Batch{Audit: []store.AuditEntry{{Route: "/spooled"}}}) == nil {
		spooled++
	}
	if _, err := first.Journal.Audit(store.AuditEntry{Route: "/journaled"}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Journal.Call(nil, &store.Settlement{Box: "alpha", Charge: 1}); err != nil {
		t.Fatal(err)
	}
	first.Close()

	second, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open with a full spool and a journal to recover, the store answering: %v", err)
	}
	if st.audit != 1 || st.settle != 1 {
		t.Errorf("at the start the store took %d audit entries and %d settlements, want the journal's 1 and 1", st.audit, st.settle)
	}
	n, err := second.Replay(context.Background())
	if err != nil || n != spooled {
		t.Errorf("Replay = %d, %v; want the %d spooled batches", n, err, spooled)
	}
	second.Close()
	third, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	third.Close()
	if st.audit != 1+spooled || st.settle != 1 {
		t.Errorf("the store took %d audit entries and %d settlements in all, want %d and 1", st.audit, st.settle, 1+spooled)
	}
}

// downStore is a keyStore that answers no write while down is set.
type downStore struct {
	keyStore
	down atomic.Bool
}

func (d *downStore) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	if d.down.Load() {
		return false, store.ErrUnavailable
	}
	return d.keyStore.ApplySpooled(ctx, key, settle, audit)
}

// TestReplay_HandsOnWhatNeitherTook: while the store is down and the
// spool full, an audit batch and a settlement batch are taken by
// neither, and stay in the journal. Once the store answers again, the
// replay applies them too, each under its own key, without a restart
// (the budget counts the charge from then on); applied again by a
// later replay or a restart's recovery, they apply once.
func TestReplay_HandsOnWhatNeitherTook(t *testing.T) {
	dir := t.TempDir()
	st := &downStore{}
	cfg := Config{Dir: dir, Store: st, Logger: quiet, spoolMax: 4096, BatchEvery: time.Hour}
	o, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spooled := 0
	for o.Spool.Append(Batch{Audit: []store.AuditEntry{{Route: "/spooled"}}}) == nil {
		spooled++
	}
	o.Spool.max = o.Spool.Size() // full to the byte
	st.down.Store(true)
	e := store.AuditEntry{Route: "/answered"}
	n, err := o.Journal.Audit(e)
	if err != nil {
		t.Fatal(err)
	}
	o.Audit.write(t.Context(), []store.AuditEntry{e}, []uint64{n})
	if o.Audit.Recording() == nil {
		t.Fatal("an audit batch taken by neither the store nor the spool: Recording() = nil")
	}
	s := store.Settlement{Box: "alpha", Charge: 7}
	if n, err = o.Journal.Call(nil, &s); err != nil {
		t.Fatal(err)
	}
	if err := o.record(t.Context(), s, []uint64{n}); err == nil {
		t.Fatal("a settlement taken by neither: record = nil")
	}

	st.down.Store(false)
	got, err := o.Replay(t.Context())
	if err != nil {
		t.Fatalf("Replay = %d, %v", got, err)
	}
	if st.audit != spooled+1 || st.settle != 1 {
		t.Errorf("after the replay the store holds %d audit entries and %d settlements, want %d and 1 (the spool's, and what neither took)",
			st.audit, st.settle, spooled+1)
	}
	if _, err := o.Replay(t.Context()); err != nil {
		t.Fatal(err)
	}
	o.Close()
	again, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Replay(t.Context()); err != nil {
		t.Fatal(err)
	}
	again.Close()
	if st.audit != spooled+1 || st.settle != 1 {
		t.Errorf("after a second replay and a restart the store holds %d audit entries and %d settlements, want %d and 1",
			st.audit, st.settle, spooled+1)
	}
}
