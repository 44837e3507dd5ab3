package outbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// lines is how many lines the journal at p holds after its header.
func lines(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte{'\n'}) - 1
}

// A call's audit entry and settlement share one record: its audit batch
// done leaves the settlement kept, and a recovery hands on the
// settlement alone, once; its settlement batch begun and not done is
// handed on under its own key with the settlement only.
func TestJournalCall_PartsAreDoneApart(t *testing.T) {
	for _, c := range []struct {
		name      string
		auditDone bool // the audit batch is done (else begun only)
		settle    bool // a settlement batch is begun, not done
	}{
		{"audit done, settlement in no batch", true, false},
		{"audit done, settlement begun", true, true},
		{"audit begun, settlement in no batch", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir, 0, nil)
			n, err := j.Call(&store.AuditEntry{Route: "r1"}, &store.Settlement{Box: "b1", Charge: 5})
			if err != nil || n == 0 {
				t.Fatalf("Call = %d, %v", n, err)
			}
			if got := lines(t, j.Path()); got != 1 {
				t.Fatalf("journal holds %d lines after one call, want 1", got)
			}
			if err := j.BeginPart("A", PartAudit, []uint64{n}); err != nil {
				t.Fatal(err)
			}
			if c.auditDone {
				j.Done("A")
			}
			if c.settle {
				if err := j.BeginPart("T", PartSettle, []uint64{n}); err != nil {
					t.Fatal(err)
				}
			}
			if j.Pending() != 1 {
				t.Fatalf("Pending = %d, want 1: the record has a part not done", j.Pending())
			}
			j.Close()
			st := newApplier()
			var keys []string
			open(t, dir, 0, func(b Batch) error {
				keys = append(keys, b.Key)
				if (b.Key == "A" && len(b.Settle) != 0) || (b.Key == "T" && len(b.Audit) != 0) {
					t.Errorf("batch %s handed on with audit %v settle %v: another part than its own", b.Key, b.Audit, b.Settle)
				}
				return st.apply(b)
			})
			wantAudit := 0
			if !c.auditDone {
				wantAudit = 1
			}
			if st.audits["r1"] != wantAudit || st.settle["b1"] != 1 {
				t.Errorf("recovered audits %v settlements %v (keys %v), want r1 %d times, b1 once", st.audits, st.settle, keys, wantAudit)
			}
			if c.settle && (len(keys) != 1 || keys[0] != "T") {
				t.Errorf("keys handed on %v, want the begun batch's T only", keys)
			}
		})
	}
}

// A record whose audit entry is done and whose settlement is not keeps
// only its settlement through a rewrite: a recovery after it does not
// apply the audit entry again.
func TestJournalCall_RewriteKeepsOnlyThePartNotDone(t *testing.T) {
	dir := t.TempDir()
	const max = 4 << 10
	j := open(t, dir, max, nil)
	stuck, _ := j.Call(&store.AuditEntry{Route: "stuck"}, &store.Settlement{Box: "stuck", Charge: 1})
	j.BeginPart("A", PartAudit, []uint64{stuck})
	j.Done("A")
	for range 500 {
		n, err := j.Call(&store.AuditEntry{Route: "r", Message: "a record of some length"}, &store.Settlement{Box: "b"})
		if err != nil {
			t.Fatal(err)
		}
		ka, kt := NewKey(), NewKey()
		j.BeginPart(ka, PartAudit, []uint64{n})
		j.Done(ka)
		j.BeginPart(kt, PartSettle, []uint64{n})
		j.Done(kt)
	}
	if j.compacted == 0 || j.Size() > max+1024 {
		t.Fatalf("journal of %d bytes not rewritten within its bound %d", j.Size(), max)
	}
	j.Close()
	st := newApplier()
	open(t, dir, max, st.apply)
	if st.audits["stuck"] != 0 || st.settle["stuck"] != 1 || st.audits["r"] != 0 || st.settle["b"] != 0 {
		t.Errorf("recovered audits %v settlements %v, want only the stuck settlement", st.audits, st.settle)
	}
}

// A journal written before a call's parts shared a record — one record
// each, batches naming no part — still replays, each record once.
func TestRecover_TwoRecordJournal(t *testing.T) {
	dir := t.TempDir()
	old := `{"gen":"g1"}
{"n":1,"a":{"Route":"r1"}}
{"n":2,"t":{"Box":"b1","Charge":5}}
{"n":3,"a":{"Route":"r3"}}
{"n":4,"t":{"Box":"b4","Charge":7}}
{"b":"A","of":[1,2]}
{"d":"A"}
{"b":"B","of":[3]}
`
	if err := os.WriteFile(filepath.Join(dir, journalName("g1")), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	st := newApplier()
	var keys []string
	open(t, dir, 0, func(b Batch) error { keys = append(keys, b.Key); return st.apply(b) })
	if st.audits["r1"] != 0 || st.settle["b1"] != 0 || st.audits["r3"] != 1 || st.settle["b4"] != 1 {
		t.Errorf("recovered audits %v settlements %v, want r3 and b4 once, nothing of the done batch", st.audits, st.settle)
	}
	if len(keys) != 2 || keys[0] != "B" || keys[1] != recoveryKey("g1", 4) {
		t.Errorf("keys %v, want B then the recovery key of record 4", keys)
	}
}

// A call's settlement, held by its Call, is journaled with its audit
// entry in one record, and settled in the next batch; the audit entry is
// queued. A call that keeps no audit entry has its settlement journaled
// alone as it closes.
func TestRecordCall_OneRecordForAuditAndSettlement(t *testing.T) {
	o, st, stop := batching(t)
	before := lines(t, o.Journal.Path())

	cc := &CallContext{Context: context.Background()}
	if CallFrom(context.WithoutCancel(cc)) != &cc.Call {
		t.Fatal("CallFrom does not find the Call through a derived context")
	}
	if !o.QueueCall(context.WithoutCancel(cc), usage("salad", "m", 1, 1, 1, 10)) {
		t.Fatal("QueueCall = false while batching")
	}
	if got := lines(t, o.Journal.Path()); got != before {
		t.Fatalf("a held settlement was journaled before its call concluded (%d lines, want %d)", got, before)
	}
	o.RecordCall(&cc.Call, store.AuditEntry{Route: "r1", Box: "salad"})
	cc.Call.Close() // nothing left: no second record
	if got := lines(t, o.Journal.Path()); got != before+1 {
		t.Fatalf("journal grew by %d lines for one call, want 1", got-before)
	}
	if o.Journal.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", o.Journal.Pending())
	}
	// The second call keeps no audit entry: its settlement alone.
	cc2 := &CallContext{Context: context.Background()}
	o.QueueCall(cc2, usage("salad", "m", 1, 1, 1, 20))
	cc2.Call.Close()
	if got := lines(t, o.Journal.Path()); got != before+2 {
		t.Fatalf("journal grew by %d lines for two calls, want 2", got-before)
	}
	// A settlement queued after its Call closed is journaled at once.
	o.QueueCall(cc2, usage("salad", "m", 1, 1, 1, 40))
	if got := lines(t, o.Journal.Path()); got != before+3 {
		t.Fatalf("a settlement queued after its call closed was not journaled at once")
	}

	stop()
	got := st.settled()
	if len(got) != 1 || got[0].Charge != 70 {
		t.Fatalf("settled %+v, want one settlement of 70", got)
	}
	if o.Journal.Pending() != 1 {
		t.Errorf("Pending = %d after the settlements were done, want 1 (the audit entry, not yet written)", o.Journal.Pending())
	}
}
