package outbox

import (
	"fmt"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// withRecoverBatch lowers recoverBatch to n for t, and counts, through
// recoverHeld, the most records a recovery holds decoded at once.
func withRecoverBatch(t *testing.T, n int) *int {
	t.Helper()
	oldBatch, oldHeld := recoverBatch, recoverHeld
	most := new(int)
	recoverBatch = n
	recoverHeld = func(held int) { *most = max(*most, held) }
	t.Cleanup(func() { recoverBatch, recoverHeld = oldBatch, oldHeld })
	return most
}

// TestRecover_ManyRecordsAreHeldABatchAtATime: a journal a replica left
// with many records not done (a long outage of the store and the spool)
// is recovered holding at most a batch's records at once, not the
// file's: every record not done is handed on once, none done is, a
// batch begun and not done goes whole under its own key, and the
// records in no batch go in the order written, recoverBatch at a time.
func TestRecover_ManyRecordsAreHeldABatchAtATime(t *testing.T) {
	const bound, records = 8, 2000
	most := withRecoverBatch(t, bound)
	dir := t.TempDir()
	j := open(t, dir, 0, nil)
	var n [records + 1]uint64
	for i := 1; i <= records; i++ {
		var e *store.AuditEntry
		var s *store.Settlement
		if i%3 != 0 {
			e = &store.AuditEntry{Route: fmt.Sprintf("r%d", i)}
		}
		if i%3 != 1 {
			s = &store.Settlement{Box: fmt.Sprintf("b%d", i), Charge: int64(i)}
		}
		var err error
		if n[i], err = j.Call(e, s); err != nil {
			t.Fatal(err)
		}
	}
	// Done: the audit entries of records 1 to 5, and the settlements of
	// 6 to 9. Begun and not done: the audit entries of records named
	// from across the file (a batch begun may name records written long
	// before), and the settlements of 10 to 14.
	if err := j.BeginPart("done-a", PartAudit, n[1:6]); err != nil {
		t.Fatal(err)
	}
	j.Done("done-a")
	if err := j.BeginPart("done-t", PartSettle, n[6:10]); err != nil {
		t.Fatal(err)
	}
	j.Done("done-t")
	spread := []uint64{n[20], n[700], n[1400], n[records-1]}
	if err := j.BeginPart("open-a", PartAudit, spread); err != nil {
		t.Fatal(err)
	}
	if err := j.BeginPart("open-t", PartSettle, n[10:15]); err != nil {
		t.Fatal(err)
	}
	j.Close() // the kill

	audits, settles := map[string]int{}, map[string]int{}
	var keys []string
	batches := map[string]Batch{}
	open(t, dir, 0, func(b Batch) error {
		if got := len(b.Audit) + len(b.Settle); got > 2*bound {
			t.Errorf("batch %s holds %d parts of records, want at most %d", b.Key, got, 2*bound)
		}
		if _, dup := batches[b.Key]; dup {
			t.Errorf("batch %s handed on twice", b.Key)
		}
		batches[b.Key] = b
		keys = append(keys, b.Key)
		for _, e := range b.Audit {
			audits[e.Route]++
		}
		for _, s := range b.Settle {
			settles[s.Box]++
		}
		return nil
	})
	if *most > bound {
		t.Errorf("recovery held %d records at once, want at most %d (recoverBatch)", *most, bound)
	}
	for i := 1; i <= records; i++ {
		wantA, wantT := 0, 0
		if i%3 != 0 && i > 5 {
			wantA = 1
		}
		if i%3 != 1 && (i < 6 || i > 9) {
			wantT = 1
		}
		if got := audits[fmt.Sprintf("r%d", i)]; got != wantA {
			t.Errorf("audit entry of record %d handed on %d times, want %d", i, got, wantA)
		}
		if got := settles[fmt.Sprintf("b%d", i)]; got != wantT {
			t.Errorf("settlement of record %d handed on %d times, want %d", i, got, wantT)
		}
	}
	if len(keys) < 2 || keys[0] != "open-a" || keys[1] != "open-t" {
		t.Fatalf("batches handed on %v…, want open-a and open-t first", keys[:min(len(keys), 3)])
	}
	var routes []string
	for _, e := range batches["open-a"].Audit {
		routes = append(routes, e.Route)
	}
	if want := fmt.Sprint([]string{"r20", "r700", "r1400", fmt.Sprintf("r%d", records-1)}); fmt.Sprint(routes) != want {
		t.Errorf("batch open-a holds %v, want %s", routes, want)
	}
	if got := len(batches["open-t"].Settle); got != 3 { // 11, 12 and 14: 10 and 13 hold none
		t.Errorf("batch open-t holds %d settlements, want 3", got)
	}
	// The records in no batch keep the order written.
	last := 0
	for _, k := range keys[2:] {
		b := batches[k]
		for _, e := range b.Audit {
			var i int
			fmt.Sscanf(e.Route, "r%d", &i)
			if i < last {
				t.Errorf("audit entry of record %d handed on after record %d's", i, last)
			}
			last = i
		}
	}
}

// TestRecover_RewriteKeepsTheOrderWritten: a journal rewritten (past its
// bound) with many records not done keeps them in the order written, so
// that its recovery hands them on in that order.
func TestRecover_RewriteKeepsTheOrderWritten(t *testing.T) {
	const records = 300
	dir := t.TempDir()
	j := open(t, dir, 1, nil)
	var first uint64
	for i := 1; i <= records; i++ {
		n, err := j.Audit(store.AuditEntry{Route: fmt.Sprintf("r%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			first = n
		}
	}
	before := j.Size()
	if err := j.Begin("k", []uint64{first}); err != nil {
		t.Fatal(err)
	}
	j.Done("k") // past the bound: rewritten with records 2 to 300
	if j.Size() >= before {
		t.Fatalf("journal of %d bytes not rewritten (was %d)", j.Size(), before)
	}
	j.Close() // the kill

	var routes []string
	open(t, dir, 0, func(b Batch) error {
		for _, e := range b.Audit {
			routes = append(routes, e.Route)
		}
		return nil
	})
	if len(routes) != records-1 {
		t.Fatalf("recovered %d audit entries, want %d", len(routes), records-1)
	}
	for i, r := range routes {
		if want := fmt.Sprintf("r%d", i+2); r != want {
			t.Fatalf("audit entry %d recovered = %q, want %q (the order written)", i, r, want)
		}
	}
}
