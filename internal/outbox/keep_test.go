package outbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

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
