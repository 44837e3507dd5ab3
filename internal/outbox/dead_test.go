package outbox

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// boundMonth is the month of the usage nearBound keeps.
const boundMonth = "2026-10"

// boundUsage is box's usage of one call with in input tokens in boundMonth.
func boundUsage(box string, in int64) []store.Usage {
	return []store.Usage{{Box: box, Month: boundMonth, PayerKind: "shared", Model: "m", Calls: 1, InputTokens: in}}
}

// nearBound opens a SQLite store in dir with the boxes alpha and beta,
// alpha's usage kept near the column's bound already: a batch adding
// 1<<62 input tokens to it is refused for good.
func nearBound(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(filepath.Join(dir, "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, b := range []string{"alpha", "beta"} {
		if err := st.CreateBox(ctx, store.Box{Name: b, TokenHash: b, CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Settle(ctx, store.Settlement{Box: "alpha", Month: boundMonth, Usage: boundUsage("alpha", math.MaxInt64-1)}); err != nil {
		t.Fatal(err)
	}
	return st
}

// nearBoundOutbox is an Outbox over nearBound's store, in a temporary
// data directory.
func nearBoundOutbox(t *testing.T) (*Outbox, *sqlite.Store) {
	t.Helper()
	dir := t.TempDir()
	st := nearBound(t, dir)
	id, err := st.Identity(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ob, err := Open(Config{Dir: dir, Store: st, Identity: id, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	return ob, st
}

// TestSpool_OneRejectedBatchDoesNotWedgeTheRest: a spooled batch the
// store refuses for good (its usage carries a kept sum past SQLite's
// INTEGER range: "cannot store REAL value in INTEGER column") at the head
// of the spool, with twenty batches of another box behind it. The bound
// held: one replay applies all twenty, the spool ends empty, and the
// refused batch is kept as a dead letter, with its reason, that a retry
// refuses again and a drop removes. On the code before, the replay
// stopped at the refused batch at every try, and none of the twenty
// reached the store. Bounded by a temporary SQLite file; well under a
// second.
func TestSpool_OneRejectedBatchDoesNotWedgeTheRest(t *testing.T) {
	const good = 20
	ctx := t.Context()
	ob, st := nearBoundOutbox(t)
	bad := Batch{Key: NewKey(), Settle: []store.Settlement{{Box: "alpha", Month: boundMonth, Charge: 7, Usage: boundUsage("alpha", 1<<62)}}}
	if err := ob.Spool.Append(bad); err != nil {
		t.Fatal(err)
	}
	for i := range good {
		b := Batch{Settle: []store.Settlement{{Box: "beta", Month: boundMonth, Charge: 1, Usage: boundUsage("beta", 10)}},
			Audit: []store.AuditEntry{{Box: "beta", At: time.Now(), Method: "POST", Route: "/llm/anthropic/v1/messages", Status: 200, Message: string(rune('a' + i))}}}
		if err := ob.Spool.Append(b); err != nil {
			t.Fatal(err)
		}
	}

	n, err := ob.Replay(ctx)
	if err != nil || n != good {
		t.Errorf("Replay = %d, %v; want %d applied and no error", n, err, good)
	}
	u, err := st.ListUsage(ctx, "beta", boundMonth)
	if err != nil {
		t.Fatal(err)
	}
	calls := int64(0)
	for _, r := range u {
		calls += r.Calls
	}
	entries, err := st.ListAudit(ctx, store.AuditQuery{Box: "beta", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("batches behind the refused one: %d; kept in the store: %d calls of usage, %d audit entries; dead letters: %d",
		good, calls, len(entries), ob.Spool.DeadCount())
	if calls != good || len(entries) != good {
		t.Errorf("the store holds %d calls and %d audit entries of beta, want %d of each", calls, len(entries), good)
	}
	if s := ob.Spool.Size(); s != 0 {
		t.Errorf("spool holds %d bytes after the replay, want none", s)
	}

	dead, err := ob.ListDead()
	if err != nil || len(dead) != 1 || dead[0].ID != bad.Key || dead[0].Reason == "" || len(dead[0].Batch.Settle) != 1 {
		t.Fatalf("ListDead = %+v, %v; want the refused batch %s with its reason", dead, err, bad.Key)
	}
	if ob.Spool.DeadCount() != 1 {
		t.Errorf("DeadCount = %d, want 1", ob.Spool.DeadCount())
	}
	// A replay of the same batch (a replay cut short) does not set it
	// aside twice.
	if err := ob.Spool.SetDead(bad, errors.New("again")); err != nil || ob.Spool.DeadCount() != 1 {
		t.Errorf("SetDead of a batch set aside = %v, count %d; want nil, 1", err, ob.Spool.DeadCount())
	}
	if _, err := ob.RetryDead(ctx, bad.Key[:8]); !errors.Is(err, store.ErrRejected) {
		t.Errorf("RetryDead(still refused) = %v, want store.ErrRejected", err)
	}
	if ob.Spool.DeadCount() != 1 {
		t.Errorf("DeadCount after a refused retry = %d, want 1", ob.Spool.DeadCount())
	}
	if _, err := ob.DropDead("nosuch"); !errors.Is(err, ErrNoDead) {
		t.Errorf("DropDead(nosuch) = %v, want ErrNoDead", err)
	}
	if d, err := ob.DropDead(bad.Key); err != nil || d.ID != bad.Key {
		t.Errorf("DropDead = %+v, %v", d, err)
	}
	if dead, _ := ob.ListDead(); len(dead) != 0 || ob.Spool.DeadCount() != 0 {
		t.Errorf("after the drop: %d dead letters (count %d), want none", len(dead), ob.Spool.DeadCount())
	}
}

// TestRetryDead_AppliesOnceTheStoreTakesIt: a dead letter retried once
// the store takes it is applied under its key and removed.
func TestRetryDead_AppliesOnceTheStoreTakesIt(t *testing.T) {
	dir := t.TempDir()
	k := &keyStore{}
	ob, err := Open(Config{Dir: dir, Store: k, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	b := Batch{Key: NewKey(), Settle: []store.Settlement{{Box: "alpha", Charge: 1}}}
	if err := ob.Spool.SetDead(b, store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.RetryDead(t.Context(), b.Key); err != nil {
		t.Fatalf("RetryDead = %v", err)
	}
	if k.settle != 1 || !k.keys[b.Key] {
		t.Errorf("the store applied %d settlements (key %v), want 1 under the batch's key", k.settle, k.keys[b.Key])
	}
	if n := ob.Spool.DeadCount(); n != 0 {
		t.Errorf("DeadCount after the retry = %d, want 0", n)
	}
}

// TestRefused_TellsABatchRefusedForGoodFromAnOutage.
func TestRefused_TellsABatchRefusedForGoodFromAnOutage(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("something else"), false},
		{store.ErrUnavailable, false},
		{errors.Join(store.ErrUnavailable, store.ErrRejected), false},
		{store.ErrRejected, true},
		{store.ErrNotFound, true},
		{store.ErrExists, true},
	}
	for _, tt := range tests {
		if got := Refused(tt.err); got != tt.want {
			t.Errorf("Refused(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestAudit_EntryEveryStoreTakes: an audit entry whose strings hold a NUL
// byte or invalid UTF-8 (a token endpoint's refusal quoted in a mint's
// message), which PostgreSQL refuses for good, is made one every store
// takes as it is queued; the caller's words are not changed.
func TestAudit_EntryEveryStoreTakes(t *testing.T) {
	words := []string{"agent", "a\x00b"}
	e := store.AuditEntry{Method: "GET", Route: "/x", Message: "said: \x00\xff\xfe ok", PaidBy: "p\xc3", Words: words}
	Scrub(&e)
	for _, s := range append([]string{e.Message, e.PaidBy}, e.Words...) {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			t.Errorf("Scrub left %q, want valid UTF-8 with no NUL", s)
		}
	}
	if e.Message != "said: \uFFFD\uFFFD ok" {
		t.Errorf("Scrub(message) = %q, want %q", e.Message, "said: \uFFFD\uFFFD ok")
	}
	if words[1] != "a\x00b" {
		t.Errorf("the caller's words were changed: %q", words)
	}
}

// TestDead_Bounded: a dead-letter file at its bound takes no more; the
// replay then stops at the refused batch and keeps it in the spool, with
// every batch behind it, as it does for an outage.
func TestDead_Bounded(t *testing.T) {
	s, err := OpenSpool(t.TempDir(), 0, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	s.dead.max = 400
	if err := s.SetDead(batch("first"), store.ErrRejected); err != nil {
		t.Fatalf("SetDead(first) = %v", err)
	}
	if err := s.SetDead(batch("second"), store.ErrRejected); !errors.Is(err, ErrFull) {
		t.Fatalf("SetDead past the bound = %v, want ErrFull", err)
	}
	for _, k := range []string{"bad", "good"} {
		if err := s.Append(batch(k)); err != nil {
			t.Fatal(err)
		}
	}
	applied := 0
	n, err := s.Replay(t.Context(), func(_ context.Context, b Batch) error {
		if b.Key == "bad" {
			return store.ErrRejected
		}
		applied++
		return nil
	})
	if err == nil || n != 0 || applied != 0 || s.Size() == 0 || s.DeadCount() != 1 {
		t.Errorf("Replay with the dead letters full = %d, %v (applied %d, spool %d bytes, %d dead); want it stopped, everything kept",
			n, err, applied, s.Size(), s.DeadCount())
	}
}

// TestReplay_OneBadRecordIsSetAsideAlone: a spooled batch of five records
// (three audit entries, two settlements) that the store refuses as a
// whole for one settlement's usage. The bound held: the other four reach
// the store, only the bad settlement is a dead letter, and the same batch
// replayed again (a crash before the spool was emptied) applies none of
// them twice and sets nothing aside twice.
func TestReplay_OneBadRecordIsSetAsideAlone(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	st := nearBound(t, dir)
	ob, err := Open(Config{Dir: dir, Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	b := Batch{Key: NewKey(),
		Settle: []store.Settlement{{Box: "alpha", Month: boundMonth, Charge: 7, Usage: boundUsage("alpha", 5)}, {Box: "beta", Month: boundMonth, Charge: 3, Usage: boundUsage("beta", 5)}}}
	for i := range 3 {
		b.Audit = append(b.Audit, store.AuditEntry{Box: "beta", At: time.Now(), Method: "POST", Route: "/x", Status: 200, Message: strings.Repeat("m", i+1)})
	}
	for round := 1; round <= 2; round++ {
		if err := ob.Spool.Append(b); err != nil {
			t.Fatal(err)
		}
		if n, err := ob.Replay(ctx); err != nil || n != 0 {
			t.Errorf("Replay #%d = %d, %v; want 0 batches applied whole and no error", round, n, err)
		}
		tl, _ := st.Tallies(ctx, "beta", boundMonth)
		entries, _ := st.ListAudit(ctx, store.AuditQuery{Box: "beta", Limit: 10})
		dead, _ := ob.ListDead()
		if len(tl) != 1 || tl[0].Spent != 3 || len(entries) != 3 || len(dead) != 1 ||
			len(dead[0].Batch.Settle) != 1 || dead[0].Batch.Settle[0].Box != "alpha" || len(dead[0].Batch.Audit) != 0 {
			t.Errorf("after replay #%d: beta's tallies %+v, %d audit entries, dead letters %+v; want spent 3, 3 entries, alpha's settlement alone set aside",
				round, tl, len(entries), dead)
		}
	}
	if s := ob.Spool.Size(); s != 0 {
		t.Errorf("spool holds %d bytes, want none", s)
	}
}

// TestSettle_RefusedWithTheDeadLettersFullIsSpooled: a settlement the
// store refuses for good, while the dead-letter file is at its bound, is
// kept in the spool rather than lost; once the dead letters have room, a
// replay sets it aside there.
func TestSettle_RefusedWithTheDeadLettersFullIsSpooled(t *testing.T) {
	ctx := t.Context()
	ob, _ := nearBoundOutbox(t)
	ob.Spool.dead.max = 400
	if err := ob.Spool.SetDead(batch("first"), store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	bad := store.Settlement{Box: "alpha", Month: boundMonth, Charge: 7, Usage: boundUsage("alpha", 1<<62)}
	if err := ob.Settle(ctx, bad); err != nil {
		t.Fatalf("Settle with the dead letters full = %v, want it spooled", err)
	}
	if ob.Spool.Size() == 0 || ob.Spool.DeadCount() != 1 {
		t.Fatalf("spool %d bytes, %d dead letters; want the settlement spooled beside the one dead letter", ob.Spool.Size(), ob.Spool.DeadCount())
	}
	if _, err := ob.DropDead("first"); err != nil {
		t.Fatal(err)
	}
	ob.Spool.dead.max = 1 << 20
	if _, err := ob.Replay(ctx); err != nil {
		t.Fatalf("Replay = %v", err)
	}
	dead, err := ob.ListDead()
	if err != nil || len(dead) != 1 || len(dead[0].Batch.Settle) != 1 || dead[0].Batch.Settle[0].Charge != 7 || ob.Spool.Size() != 0 {
		t.Errorf("after a replay with room: dead %+v, %v, spool %d bytes; want the settlement as the one dead letter", dead, err, ob.Spool.Size())
	}
}

// refusing is a Store that refuses every write for good.
type refusing struct{ fakeStore }

func (*refusing) AddAudit(context.Context, []store.AuditEntry) error { return store.ErrRejected }

func (*refusing) ApplySpooled(context.Context, string, []store.Settlement, []store.AuditEntry) (bool, error) {
	return false, store.ErrRejected
}

// TestKeep_AuditAndSettleAlike: an audit batch the Writer writes and a
// settlement Settle writes, each refused for good, are kept the same way
// (Spool.keep): set aside as a dead letter while the dead letters have
// room, and spooled once they are full; neither is lost, and the writer
// still records.
func TestKeep_AuditAndSettleAlike(t *testing.T) {
	tests := []struct {
		name  string
		write func(*Outbox) error
	}{
		{"audit", func(o *Outbox) error {
			o.Audit.write(t.Context(), []store.AuditEntry{entry(1)}, nil)
			return o.Audit.Recording()
		}},
		{"settle", func(o *Outbox) error {
			return o.Settle(t.Context(), store.Settlement{Box: "alpha", Month: boundMonth, Charge: 7})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Open(Config{Dir: t.TempDir(), Store: &refusing{}, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			if err := tt.write(o); err != nil || o.Spool.DeadCount() != 1 || o.Spool.Size() != 0 {
				t.Fatalf("write refused for good = %v, %d dead letters, spool %d bytes; want nil, 1, 0", err, o.Spool.DeadCount(), o.Spool.Size())
			}
			o.Spool.dead.max = 1 // full
			if err := tt.write(o); err != nil || o.Spool.DeadCount() != 1 || o.Spool.Size() == 0 {
				t.Errorf("write refused with the dead letters full = %v, %d dead letters, spool %d bytes; want nil, 1, spooled", err, o.Spool.DeadCount(), o.Spool.Size())
			}
		})
	}
}
