package outbox

import (
	"testing"

	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/store"
)

// written is boxbroker_audit_written_total in m.
func written(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "boxbroker_audit_written_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no boxbroker_audit_written_total")
	return 0
}

// TestAudit_ReplayedEntriesAreCountedWritten: audit entries the store
// takes from the spool's replay, or from a journal recovered at a
// restart, are counted in boxbroker_audit_written_total as those it
// takes at once are, each once: a batch replayed again, applied already,
// counts nothing.
func TestAudit_ReplayedEntriesAreCountedWritten(t *testing.T) {
	st := &downStore{}
	m := metrics.New()
	cfg := Config{Dir: t.TempDir(), Store: st, Logger: quiet, Metrics: m}
	o, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	journaled := func(n int) ([]store.AuditEntry, []uint64) {
		var es []store.AuditEntry
		var seqs []uint64
		for i := range n {
			e := entry(i)
			seq, err := o.Journal.Audit(e)
			if err != nil {
				t.Fatal(err)
			}
			es, seqs = append(es, e), append(seqs, seq)
		}
		return es, seqs
	}
	st.down.Store(true)
	es, seqs := journaled(3)
	o.Audit.write(t.Context(), es, seqs) // spooled
	if got := written(t, m); got != 0 {
		t.Errorf("written with the entries spooled = %v, want 0", got)
	}
	st.down.Store(false)
	for range 2 {
		if _, err := o.Replay(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := written(t, m); got != 3 {
		t.Errorf("written once the spool is replayed (twice) = %v, want 3", got)
	}
	journaled(2) // answered, then the replica stops before a batch takes them
	o.Close()
	m2 := metrics.New()
	cfg.Metrics = m2
	again, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Replay(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := written(t, m2); got != 2 || st.audit != 5 {
		t.Errorf("written after the journal's recovery = %v (the store holds %d), want 2 (and 5)", got, st.audit)
	}
}
