package ui_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/store"
)

// seedUpstreamFailures gives box alpha, in the last hour, one call served,
// one refused by the broker, one the upstream could not be reached for
// and one the upstream answered 529.
func seedUpstreamFailures(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	b.AddBox("alpha")
	now := time.Now().UTC()
	e := func(sec int, status, upstream int, reason, msg string) store.AuditEntry {
		return store.AuditEntry{Box: "alpha", At: now.Add(-time.Duration(sec) * time.Second), Method: "POST", Route: "/llm/anthropic/v1/messages",
			Capability: "inference", Words: []string{"agent"}, Status: status, UpstreamStatus: upstream, Reason: reason, Message: msg}
	}
	entries := []store.AuditEntry{
		e(40, 200, 200, "", ""),
		e(30, 403, 0, capability.ReasonDeclaration, "Add agent to the scope."),
		e(20, 502, 0, capability.ReasonUpstreamFailed, ""),
		e(10, 529, 529, "", ""),
	}
	if err := b.Server.Store.AddAudit(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
}

// TestUI_UpstreamFailureShownApartFromRefusals: a call the upstream
// failed shows why on the box's page (never a blank refusal), and the
// list, the chart and the box's groups count it apart from the broker's
// refusals.
func TestUI_UpstreamFailureShownApartFromRefusals(t *testing.T) {
	if store.ReasonUpstreamFailed != capability.ReasonUpstreamFailed || store.ReasonUpstreamUnusable != capability.ReasonUpstream {
		t.Fatalf("the store counts upstream failures by %q and %q, the broker writes %q and %q",
			store.ReasonUpstreamFailed, store.ReasonUpstreamUnusable, capability.ReasonUpstreamFailed, capability.ReasonUpstream)
	}
	b := brokertest.New(t, brokertest.Options{})
	seedUpstreamFailures(t, b)
	cookie := signIn(t, b, b.AdminToken)

	list := visit(t, b, "GET", "/ui/", cookie, nil, nil)
	row := list.body[strings.Index(list.body, `<td><a href="/ui/boxes/alpha"`):]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{`<span class="warn">1</span>`, "+2 upstream"} {
		if !strings.Contains(row, want) {
			t.Errorf("alpha's row = %q, want %q in it (1 refusal, 2 upstream failures)", row, want)
		}
	}
	if want := "4 requests, 1 refused by the broker (red), 2 failed upstream (amber)"; !strings.Contains(list.body, want) {
		t.Errorf("the list's chart summary lacks %q", want)
	}
	if !strings.Contains(list.body, `<rect class="failed"`) {
		t.Errorf("the list's chart draws no upstream failure")
	}

	box := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	for _, want := range []string{
		"Upstream failed: it could not be reached, or gave no answer.",
		"Upstream failed: it answered 529 (overloaded), passed on to the box as it came.",
		"1 refused by the broker (red), 2 failed upstream (amber)",
	} {
		if !strings.Contains(box.body, want) {
			t.Errorf("alpha's page lacks %q", want)
		}
	}
	// The grouped refusals say what failed upstream, in the failure's
	// colour, not a blank refusal.
	groups := box.body[strings.Index(box.body, `id="refusals"`):]
	groups = groups[:strings.Index(groups, "</table>")]
	if strings.Contains(groups, `<td class="refusal"></td>`) || !strings.Contains(groups, `<td class="upfail">Upstream failed`) {
		t.Errorf("alpha's grouped refusals = %q, want the upstream failure told, not blank", groups)
	}
}

// TestUI_OverspentBudgetDrawnOver: a budget spent past its limit is drawn
// past the bar's high mark and said to be over, never as a full bar in
// the good region with $0.00 left.
func TestUI_OverspentBudgetDrawnOver(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	ctx := context.Background()
	st := b.Server.Store
	now := time.Now().UTC()
	month := now.Format("2006-01")
	if err := st.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 1_000_000, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.Settle(ctx, store.Settlement{Box: "alpha", Month: month, Charge: 1_500_000,
		Usage: []store.Usage{{Box: "alpha", Month: month, PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 1, Cost: 1_500_000}}}); err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, b.AdminToken)
	box := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	m := regexp.MustCompile(`<meter min="0" max="([0-9.]+)" low="([0-9.]+)" high="([0-9.]+)" optimum="0" value="([0-9.]+)" class="(\w+)"`).FindStringSubmatch(box.body)
	if m == nil {
		t.Fatalf("alpha's page has no budget meter:\n%s", box.body)
	}
	num := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	max, high, value := num(m[1]), num(m[3]), num(m[4])
	if value <= high || max < value || m[5] != "over" {
		t.Errorf("an overspent budget's meter = max %v high %v value %v class %q, want the value past high, within max, class over", max, high, value, m[5])
	}
	if !strings.Contains(box.body, `<b class="over">over by $0.50</b>`) || strings.Contains(box.body, "<b>$0.00</b> left") {
		t.Errorf("alpha's page does not say its budget is over by $0.50")
	}

	// A budget not yet spent stays in the good region.
	if err := st.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 10_000_000, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	box = visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	if !strings.Contains(box.body, `class="within"`) || !strings.Contains(box.body, "<b>$8.50</b> left") {
		t.Errorf("a budget of $10 with $1.50 spent is not drawn within, $8.50 left")
	}
}

// TestUI_HourChartLeavesTheTableOnTheFirstScreen: the list's hourly
// chart is a strip (its height under a tenth of its width), so that on a
// laptop's screen the table of boxes starts above the fold.
func TestUI_HourChartLeavesTheTableOnTheFirstScreen(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	seedUpstreamFailures(t, b)
	cookie := signIn(t, b, b.AdminToken)
	for _, path := range []string{"/ui/", "/ui/boxes/alpha"} {
		p := visit(t, b, "GET", path, cookie, nil, nil)
		m := regexp.MustCompile(`<svg class="chart" viewBox="0 0 (\d+) (\d+)" role="img" aria-label="Requests`).FindStringSubmatch(p.body)
		if m == nil {
			t.Fatalf("%s has no hourly chart", path)
		}
		w, _ := strconv.Atoi(m[1])
		h, _ := strconv.Atoi(m[2])
		if float64(h) > 0.1*float64(w) {
			t.Errorf("%s's hourly chart is %d by %d, want its height under a tenth of its width", path, w, h)
		}
	}
}
