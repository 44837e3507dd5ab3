package ui

import (
	"github.com/intentius/boxbroker/internal/admin"

	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// TestBrokerHours: the list's chart counts every hour of the week from
// the audit log, keeps the settled ones, and reads only what is newer on
// the next render; an hour leaves the chart when it leaves the week.
func TestBrokerHours(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 30, 0, 0, time.UTC)
	add := func(at time.Time, reason string) {
		t.Helper()
		if err := st.AddAudit(ctx, []store.AuditEntry{{Box: "alpha", At: at, Method: "GET", Route: "/x", Capability: "inference", Status: 200, Reason: reason}}); err != nil {
			t.Fatal(err)
		}
	}
	add(now.Add(-7*24*time.Hour+time.Hour), "")
	add(now.Add(-3*time.Hour), "")
	add(now.Add(-3*time.Hour), "token")
	add(now.Add(-time.Minute), "")
	u := &Page{cfg: admin.Config{Store: st}}
	sum := func(hs []store.HourCount) (req, ref int64) {
		for _, h := range hs {
			req += h.Requests
			ref += h.Refusals
		}
		return req, ref
	}
	hours, err := u.brokerHours(ctx, now.Add(-7*24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	if req, ref := sum(hours); req != 4 || ref != 1 {
		t.Errorf("brokerHours = %d requests, %d refusals, want 4, 1", req, ref)
	}
	if len(u.hours.done) != 2 {
		t.Errorf("brokerHours kept %d settled hours, want 2 (the current hour is not settled)", len(u.hours.done))
	}
	// An hour later: the new hour's entry is read; the week's first hour
	// has left the chart.
	later := now.Add(2 * time.Hour)
	add(later.Add(-time.Minute), "token")
	hours, err = u.brokerHours(ctx, later.Add(-7*24*time.Hour), later)
	if err != nil {
		t.Fatal(err)
	}
	if req, ref := sum(hours); req != 4 || ref != 2 {
		t.Errorf("brokerHours two hours later = %d requests, %d refusals, want 4, 2", req, ref)
	}
	// A clock gone back past what is kept starts again from the log.
	hours, err = u.brokerHours(ctx, now.Add(-7*24*time.Hour), now.Add(-5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if req, _ := sum(hours); req != 5 {
		t.Errorf("brokerHours with the clock back = %d requests, want all 5 read again", req)
	}
}
