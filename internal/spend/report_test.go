package spend_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func str(s string) *string { return &s }

func TestCompare(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if err := st.CreateBox(ctx, store.Box{Name: "salad", TokenHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const m = "2026-10"
	settle := func(kind, principal, model string, cost, charge int64, unpriced int64) {
		t.Helper()
		err := st.Settle(ctx, store.Settlement{Box: "salad", Principal: principal, Month: m, Charge: charge,
			Usage: []store.Usage{{Box: "salad", Month: m, PayerKind: kind, Principal: principal, Model: model, Calls: 1, Unpriced: unpriced, Cost: cost}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	settle("shared", "", "claude-sonnet-4-5", 1_000_000, 1_000_000, 0)
	settle("visitor", "github:ann", "claude-haiku-4-5", 500_000, 500_000, 0)
	settle("visitor", "github:ann", "claude-mystery", 0, 40_000, 1)
	settle("owner", "github:bob", "claude-haiku-4-5", 2_000_000, 2_000_000, 0)

	// Before any report: measured only, nothing flagged.
	rep, err := spend.Compare(ctx, st, "salad", m)
	if err != nil {
		t.Fatalf("Compare = %v", err)
	}
	if rep.Reported != nil || rep.Differs || rep.Measured != 3_500_000 || rep.Charged != 3_540_000 || rep.Calls != 4 || rep.Unpriced != 1 {
		t.Errorf("Compare before a report = %+v, want measured $3.50, charged $3.54, 4 calls, 1 unpriced, no report", rep)
	}

	report := func(spent *protocol.Spend) {
		t.Helper()
		doc, _ := json.Marshal(protocol.Declaration{Capabilities: []protocol.Capability{}, Spend: spent})
		if _, err := st.SaveDeclaration(ctx, "salad", "h", doc, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	report(&protocol.Spend{Month: m, USD: 3.2, Runs: 9, Unpriced: 1, ByPrincipal: []protocol.PrincipalSpend{
		{Principal: nil, USD: 1.004, Runs: 3},
		{Principal: str("github:ann"), USD: 0.2, Runs: 5, Unpriced: 1},
		{Principal: str("github:cat"), USD: 2.0, Runs: 1},
	}})
	rep, err = spend.Compare(ctx, st, "salad", m)
	if err != nil {
		t.Fatalf("Compare = %v", err)
	}
	type line struct {
		Principal string
		Measured  int64
		Charged   int64
		Reported  float64
		Differs   bool
	}
	var got []line
	for _, l := range rep.Lines {
		g := line{Measured: l.Measured, Charged: l.Charged, Differs: l.Differs}
		if l.Principal != nil {
			g.Principal = *l.Principal
		}
		if l.Reported != nil {
			g.Reported = l.Reported.USD
		}
		got = append(got, g)
	}
	want := []line{
		{"", 1_000_000, 1_000_000, 1.004, false},      // within a cent
		{"github:ann", 500_000, 540_000, 0.2, true},   // $0.50 measured, $0.20 reported
		{"github:bob", 2_000_000, 2_000_000, 0, true}, // measured, not reported
		{"github:cat", 0, 0, 2.0, true},               // reported, not measured
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Compare lines mismatch (-want +got):\n%s", d)
	}
	if !rep.Differs || rep.ReportedMonth != m || rep.Reported.USD != 3.2 {
		t.Errorf("Compare = differs %v, reported month %q, want differs, %s", rep.Differs, rep.ReportedMonth, m)
	}

	// A report for another month is not compared.
	report(&protocol.Spend{Month: "2026-09", USD: 99, ByPrincipal: []protocol.PrincipalSpend{}})
	rep, err = spend.Compare(ctx, st, "salad", m)
	if err != nil || rep.Reported != nil || rep.ReportedMonth != "2026-09" || rep.Differs {
		t.Errorf("Compare with September's report = %+v, %v, want nothing compared, reported month 2026-09", rep, err)
	}

	if _, err := spend.Compare(ctx, st, "nobox", m); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Compare(nobox) = %v, want ErrNotFound", err)
	}
	if _, err := spend.Compare(ctx, st, "salad", "2026-13"); err == nil {
		t.Errorf("Compare(2026-13) = nil, want an error")
	}
}

func TestTolerance(t *testing.T) {
	tests := []struct {
		a, b int64
		want int64
	}{
		{0, 0, 10_000},
		{1_000_000, 900_000, 50_000},
		{100_000_000, 0, 5_000_000},
	}
	for _, tt := range tests {
		if got := spend.Tolerance(tt.a, tt.b); got != tt.want {
			t.Errorf("Tolerance(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestBudgets(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if err := st.CreateBox(ctx, store.Box{Name: "salad", TokenHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []store.Budget{{Box: "salad", Limit: 1_000_000}, {Box: "salad", Principal: "github:ann", Limit: 300_000}} {
		if err := st.SetBudget(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Reserve(ctx, store.Reservation{Box: "salad", Principal: "github:ann", Month: "2026-10", Amount: 100_000}); err != nil {
		t.Fatal(err)
	}
	if err := st.Settle(ctx, store.Settlement{Box: "salad", Principal: "github:ann", Month: "2026-10", Charge: 250_000}); err != nil {
		t.Fatal(err)
	}
	got, err := spend.Budgets(ctx, st, "salad", "2026-10")
	if err != nil {
		t.Fatalf("Budgets = %v", err)
	}
	resets := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if len(got) != 2 || got[0].Principal != "" || got[0].Spent != 250_000 || got[0].Reserved != 100_000 || got[0].Left != 650_000 || !got[0].Resets.Equal(resets) ||
		got[1].Principal != "github:ann" || got[1].Left != 0 {
		t.Errorf("Budgets = %+v, want the box's with $0.65 left and ann's with none, resetting %v", got, resets)
	}
	if _, err := spend.Budgets(ctx, st, "nobox", "2026-10"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Budgets(nobox) = %v, want ErrNotFound", err)
	}
}
