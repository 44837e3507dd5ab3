package outbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// AddAudit counts entries written with no key (not journaled).
func (k *keyStore) AddAudit(_ context.Context, audit []store.AuditEntry) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.audit += len(audit)
	return nil
}

// failBatchLines makes the journal's writes of a batch's begun line stop
// half way, as on a full disk, until the test ends; its other lines are
// written.
func failBatchLines(t *testing.T) {
	t.Helper()
	writeJournal = func(f *os.File, b []byte) (int, error) {
		if !bytes.Contains(b, []byte(`"b":"`)) {
			return f.Write(b)
		}
		n, _ := f.Write(b[:len(b)/2])
		return n, errors.New("no space left on device")
	}
	t.Cleanup(func() { writeJournal = (*os.File).Write })
}

// failJournal makes every write of the journal fail, as on a disk that
// refuses writes, until the test ends.
func failJournal(t *testing.T) {
	t.Helper()
	writeJournal = func(*os.File, []byte) (int, error) { return 0, errors.New("input/output error") }
	t.Cleanup(func() { writeJournal = (*os.File).Write })
}

// fullSpool fills o's spool to the byte with batches of its own, and
// returns how many audit entries they hold.
func fullSpool(t *testing.T, o *Outbox) int {
	t.Helper()
	spooled := 0
	for o.Spool.Append(Batch{Audit: []store.AuditEntry{{Route: "/spooled"}}}) == nil {
		spooled++
	}
	o.Spool.max = o.Spool.Size()
	return spooled
}

// TestJournal_BatchItCannotNameIsNotAppliedTwice: a batch's begun line
// cut short by a full disk leaves its records in no batch the journal
// names, which a recovery hands on under keys of its own. Such a batch
// (of audit entries, of settlements) is not sent to the store; the
// journal hands it on once it can write, and whether the replica is
// killed first or serves on, each record is applied once.
func TestJournal_BatchItCannotNameIsNotAppliedTwice(t *testing.T) {
	for _, killed := range []bool{true, false} {
		name := "served on"
		if killed {
			name = "killed"
		}
		t.Run(name, func(t *testing.T) {
			st := &keyStore{}
			cfg := Config{Dir: t.TempDir(), Store: st, Logger: quiet}
			o, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			e := store.AuditEntry{Route: "/answered"}
			na, err := o.Journal.Audit(e)
			if err != nil {
				t.Fatal(err)
			}
			s := store.Settlement{Box: "alpha", Charge: 7}
			ns, err := o.Journal.Call(nil, &s)
			if err != nil {
				t.Fatal(err)
			}
			failBatchLines(t)
			unjournaled := store.AuditEntry{Route: "/minted"}
			o.Audit.write(t.Context(), []store.AuditEntry{e, unjournaled}, []uint64{na, 0})
			_ = o.record(t.Context(), s, []uint64{ns})
			writeJournal = (*os.File).Write
			if !killed {
				if _, err := o.Replay(t.Context()); err != nil {
					t.Fatalf("Replay: %v", err)
				}
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
			if st.audit != 2 || st.settle != 1 {
				t.Errorf("the store took %d audit entries and %d settlements, want 2 and 1", st.audit, st.settle)
			}
		})
	}
}

// TestSettle_BudgetedCallKeptWhenNeitherStoreNorSpoolTakesIt: a
// budgeted call's settlement (one that released a reservation, settled
// alone, journaled nowhere before) that neither the store nor a full
// spool takes is kept by the journal — in memory when the journal cannot
// write either — and applied once the store answers, once, across a
// replay run twice and a restart, or by the restart's recovery when the
// replica is killed first.
func TestSettle_BudgetedCallKeptWhenNeitherStoreNorSpoolTakesIt(t *testing.T) {
	tests := []struct {
		name                  string
		killed, journalFailed bool
	}{
		{"store back", false, false},
		{"killed, then started", true, false},
		{"journal refuses writes too, then store back", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &downStore{}
			cfg := Config{Dir: t.TempDir(), Store: st, Logger: quiet, spoolMax: 4096, BatchEvery: time.Hour}
			o, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			spooled := fullSpool(t, o)
			st.down.Store(true)
			if tt.journalFailed {
				failJournal(t)
			}
			if err := o.Settle(t.Context(), store.Settlement{Reservation: 9, Box: "alpha", Charge: 700}); err != nil {
				t.Errorf("Settle with the store down and the spool full = %v, want nil (kept)", err)
			}
			writeJournal = (*os.File).Write
			st.down.Store(false)
			if !tt.killed {
				for range 2 {
					if _, err := o.Replay(t.Context()); err != nil {
						t.Fatalf("Replay: %v", err)
					}
				}
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
			if st.settle != 1 || st.audit != spooled {
				t.Errorf("the store took %d settlements and %d audit entries, want 1 and %d", st.settle, st.audit, spooled)
			}
		})
	}
}

// TestKeep_HeldInMemoryIsBounded: while neither the store, a full spool
// nor the journal takes a write, budgeted calls' settlements are held
// in memory up to the bound only: past it each is logged at ERROR as
// lost, and Err says the bound is reached (so that calls are refused,
// "cannot record"), until the store takes what is held, once.
func TestKeep_HeldInMemoryIsBounded(t *testing.T) {
	st := &downStore{}
	var log bytes.Buffer
	cfg := Config{Dir: t.TempDir(), Store: st, Logger: logTo(&log), spoolMax: 4096, BatchEvery: time.Hour}
	o, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Journal.maxHeld = 3
	spooled := fullSpool(t, o)
	st.down.Store(true)
	failJournal(t)
	for i := range 5 {
		if err := o.Settle(t.Context(), store.Settlement{Reservation: int64(i + 1), Box: "alpha", Charge: 700}); err != nil {
			t.Errorf("Settle %d = %v, want nil (kept, or logged as lost)", i, err)
		}
	}
	held := 0
	for _, b := range o.Journal.batches {
		if b.held != nil {
			held += len(b.held.Settle)
		}
	}
	if held != 3 {
		t.Errorf("%d settlements held in memory, want the bound, 3", held)
	}
	if got := strings.Count(log.String(), "settlement lost"); got != 2 {
		t.Errorf("%d settlements logged as lost, want 2:\n%s", got, log.String())
	}
	writeJournal = (*os.File).Write
	if _, err := o.Journal.Audit(store.AuditEntry{Route: "/refused"}); err != nil { // a refusal's record: the journal writes again
		t.Fatal(err)
	}
	if err := o.Journal.Err(); !errors.Is(err, ErrHeldFull) {
		t.Errorf("Err with the journal writing and the held settlements at their bound = %v, want ErrHeldFull", err)
	}
	st.down.Store(false)
	if _, err := o.Replay(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := o.Journal.Err(); err != nil {
		t.Errorf("Err once the store took what was held = %v, want nil", err)
	}
	if st.settle != 3 || st.audit != spooled {
		t.Errorf("the store took %d settlements and %d audit entries, want 3 and %d", st.settle, st.audit, spooled)
	}
}
