package ui_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_WindowBudgetAndRateLimitForms sets a day's budget and a rate
// limit on the owner's page, sees them and an alert listed, and removes
// them.
func TestUI_WindowBudgetAndRateLimitForms(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	cookie, csrf := signedInForm(t, b)
	for _, bad := range []url.Values{
		{"csrf": {csrf}, "window": {"month"}, "usd": {"5"}},
		{"csrf": {csrf}, "window": {"day"}, "usd": {"-1"}},
	} {
		if p := visit(t, b, "POST", "/ui/boxes/alpha/window-budget", cookie, bad, nil); p.status != 400 {
			t.Errorf("window budget %v = %d, want 400", bad, p.status)
		}
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/window-budget", cookie, url.Values{"csrf": {csrf}, "window": {"day"}, "usd": {"5"}}, nil); p.status != 303 {
		t.Fatalf("window budget day $5 = %d, want 303", p.status)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/rate-limit", cookie, url.Values{"csrf": {csrf}, "rpm": {""}}, nil); p.status != 400 {
		t.Errorf("rate limit with no bound = %d, want 400", p.status)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/rate-limit", cookie, url.Values{"csrf": {csrf}, "rpm": {"60"}, "output_tpm": {"20000"}}, nil); p.status != 303 {
		t.Fatalf("rate limit = %d, want 303", p.status)
	}
	if _, err := b.Server.Store.MarkAlert(context.Background(), store.BudgetAlert{Box: "alpha", Window: "day", Period: "2026-12-06", Threshold: 80, Limit: 5e6, Spent: 4e6, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	for _, want := range []string{`id="window-budgets"`, "$5.00", `id="rate-limits"`, "20000", "budget passed 80% in 2026-12-06"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("alpha's page (%d) lacks %q", p.status, want)
		}
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/window-budget/remove", cookie, url.Values{"csrf": {csrf}, "window": {"day"}}, nil); p.status != 303 {
		t.Errorf("remove window budget = %d, want 303", p.status)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/rate-limit/remove", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 303 {
		t.Errorf("remove rate limit = %d, want 303", p.status)
	}
	if ws, _ := b.Server.Store.ListWindowBudgets(context.Background(), "alpha"); len(ws) != 0 {
		t.Errorf("window budgets after remove = %+v", ws)
	}
}

// TestUI_WeekBudgetShowsItsSunday: a box's page says a weekly budget
// counts from its Monday to its Sunday, not to its Monday.
func TestUI_WeekBudgetShowsItsSunday(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	cookie, csrf := signedInForm(t, b)
	if p := visit(t, b, "POST", "/ui/boxes/alpha/window-budget", cookie, url.Values{"csrf": {csrf}, "window": {"week"}, "usd": {"5"}}, nil); p.status != 303 {
		t.Fatalf("window budget week $5 = %d, want 303", p.status)
	}
	// The week the page is of: one of the weeks of before and after it.
	week := func() string {
		d := time.Now().UTC().Truncate(24 * time.Hour)
		monday := d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
		return monday.Format(time.DateOnly) + " to " + monday.AddDate(0, 0, 6).Format(time.DateOnly)
	}
	before := week()
	p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	after := week()
	if !strings.Contains(p.body, before) && !strings.Contains(p.body, after) {
		t.Errorf("alpha's page (%d) lacks its weekly budget's days %q", p.status, before)
	}
}
