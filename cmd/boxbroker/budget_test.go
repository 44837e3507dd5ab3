package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/spend"
)

// until retries do until it returns true, failing the test after a while:
// a running broker sees the CLI's writes at its next poll of the store.
func until(t *testing.T, what string, do func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !do() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCLI_PauseResume pauses and resumes a box of a running broker with
// the CLI, on the same data directory.
func TestCLI_PauseResume(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	dir := b.Server.Config.DataDir
	token := b.AddBox("salad")
	b.Report(token, brokertest.Entry("inference", "agent"))
	b.SetCredential("anthropic", "sk-ant-api03-PAUSETEST")
	messages := func() (int, string) {
		resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-haiku-4-5","max_tokens":10}`), nil)
		_, msg := brokertest.Refusal(resp.Body)
		return resp.StatusCode, msg
	}
	if code, msg := messages(); code != 200 {
		t.Fatalf("before pausing = %d %q", code, msg)
	}

	out, errs, code := run(t, dir, "", "box", "pause", "salad")
	if code != 0 || !strings.Contains(out, "paused box salad") {
		t.Fatalf("box pause = %d %q %q", code, out, errs)
	}
	var msg string
	until(t, "a paused box refused", func() bool {
		var code int
		code, msg = messages()
		return code == 403
	})
	if !strings.Contains(msg, "paused by its owner") {
		t.Errorf("paused refusal = %q, want it to say the box is paused by its owner", msg)
	}
	if resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil); resp.StatusCode != 403 {
		t.Errorf("a paused box's models call = %d, want 403", resp.StatusCode)
	}
	// Its reports are still taken.
	b.Report(token, brokertest.Entry("inference", "agent"))
	if out, _, code := run(t, dir, "", "box", "pause", "salad"); code != 0 || !strings.Contains(out, "already paused") {
		t.Errorf("box pause again = %d %q", code, out)
	}
	if out, _, _ := run(t, dir, "", "box", "list"); !strings.Contains(out, "true") {
		t.Errorf("box list of a paused box = %q, want it shown paused", out)
	}

	if out, errs, code := run(t, dir, "", "box", "resume", "salad"); code != 0 || !strings.Contains(out, "resumed box salad") {
		t.Fatalf("box resume = %d %q %q", code, out, errs)
	}
	until(t, "a resumed box served", func() bool { code, _ := messages(); return code == 200 })
	if out, _, code := run(t, dir, "", "box", "resume", "salad"); code != 0 || !strings.Contains(out, "already running") {
		t.Errorf("box resume again = %d %q", code, out)
	}

	tests := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"box", "pause", "nobox"}, 1, "no box named nobox"},
		{[]string{"box", "resume"}, 2, "takes one NAME"},
		{[]string{"box", "pause", "a", "b"}, 2, "takes one NAME"},
		{[]string{"box", "pause", "Bad_Name"}, 2, "must match"},
		{[]string{"box", "frobnicate", "salad"}, 2, "pause"},
	}
	for _, tt := range tests {
		if _, errs, code := run(t, dir, "", tt.args...); code != tt.code || !strings.Contains(errs, tt.says) {
			t.Errorf("boxbroker %q = %d %q, want %d saying %q", tt.args, code, errs, tt.code, tt.says)
		}
	}
}

func TestCLI_Budget(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		says  string
	}{
		{"no amount", "", []string{"budget", "set", "salad"}, 2, "takes BOX AMOUNT"},
		{"bad amount", "", []string{"budget", "set", "salad", "lots"}, 2, "is not dollars"},
		{"negative", "", []string{"budget", "set", "salad", "--", "-5"}, 2, "is not dollars"},
		{"bad principal", "", []string{"budget", "set", "salad", "5", "--principal", "git hub"}, 2, "no white space"},
		{"no box", "", []string{"budget", "set", "nobox", "5"}, 1, "no box named nobox"},
		{"list no box", "", []string{"budget", "list", "nobox"}, 1, "no box named nobox"},
		{"bad month", "", []string{"budget", "list", "salad", "--month", "October"}, 2, "not written YYYY-MM"},
		{"unknown", "", []string{"budget", "show", "salad"}, 2, "unknown budget command"},
		{"none yet", "", []string{"budget", "list", "salad"}, 0, ""},
		{"remove none", "", []string{"budget", "remove", "salad", "--yes"}, 1, "there is no box salad's own budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, errs, code := run(t, dir, tt.stdin, tt.args...); code != tt.code || !strings.Contains(errs, tt.says) {
				t.Errorf("boxbroker %q = %d %q, want %d saying %q", tt.args, code, errs, tt.code, tt.says)
			}
		})
	}
	if out, _, _ := run(t, dir, "", "budget", "list", "salad"); !strings.Contains(out, "has no budget") {
		t.Errorf("budget list with none = %q", out)
	}
	if out, errs, code := run(t, dir, "", "budget", "set", "salad", "25.00"); code != 0 || !strings.Contains(out, "set box salad's own budget to $25.00 a month") {
		t.Fatalf("budget set = %d %q %q", code, out, errs)
	}
	if out, errs, code := run(t, dir, "", "budget", "set", "salad", "$5", "--principal", "github:ann"); code != 0 || !strings.Contains(out, "github:ann") {
		t.Fatalf("budget set --principal = %d %q %q", code, out, errs)
	}
	out, _, code := run(t, dir, "", "budget", "list", "salad", "--month", "2026-10")
	for _, want := range []string{"BUDGET", "box  ", "$25.00", "github:ann", "$5.00", "2026-10", "2026-11-01T00:00:00Z"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("budget list = %d %q, want it to hold %q", code, out, want)
		}
	}
	if _, _, code := run(t, dir, "n\n", "budget", "remove", "salad", "--principal", "github:ann"); code != 1 {
		t.Errorf("budget remove answered no = %d, want 1", code)
	}
	if out, _, code := run(t, dir, "y\n", "budget", "remove", "salad", "--principal", "github:ann"); code != 0 || !strings.Contains(out, "removed the budget of github:ann on box salad") {
		t.Errorf("budget remove = %d %q", code, out)
	}
	if out, _, _ := run(t, dir, "", "budget", "list", "salad"); strings.Contains(out, "github:ann") || !strings.Contains(out, "$25.00") {
		t.Errorf("budget list after remove = %q", out)
	}
}

// TestCLI_BudgetRemoveWindowKeepsMonth: `budget remove BOX --window day`
// removes the box's daily budget alone, asking about that one; its
// monthly budget still holds.
func TestCLI_BudgetRemoveWindowKeepsMonth(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	for _, args := range [][]string{{"budget", "set", "salad", "25"}, {"budget", "set", "salad", "5", "--window", "day"}} {
		if out, errs, code := run(t, dir, "", args...); code != 0 {
			t.Fatalf("boxbroker %q = %d %q %q", args, code, out, errs)
		}
	}
	if _, errs, code := run(t, dir, "n\n", "budget", "remove", "salad", "--window", "day"); code != 1 || !strings.Contains(errs, "Remove box salad's own daily budget?") {
		t.Errorf("budget remove --window day answered no = %d %q, want 1 and a question naming the daily budget", code, errs)
	}
	if out, errs, code := run(t, dir, "", "budget", "remove", "salad", "--window", "day", "--yes"); code != 0 || !strings.Contains(out, "removed box salad's own daily budget") {
		t.Fatalf("budget remove --window day = %d %q %q", code, out, errs)
	}
	out, _, code := run(t, dir, "", "budget", "list", "salad")
	if code != 0 || !strings.Contains(out, "$25.00") || strings.Contains(out, "has no budget") || strings.Contains(out, "day") {
		t.Errorf("budget list after removing the daily budget = %d %q, want the monthly $25.00 alone", code, out)
	}
}

// TestCLI_WeekBudgetListsItsSunday: `budget list` says a weekly budget
// counts from its Monday to its Sunday (FROM, TO), not to its Monday.
func TestCLI_WeekBudgetListsItsSunday(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	if out, errs, code := run(t, dir, "", "budget", "set", "salad", "5", "--window", "week"); code != 0 {
		t.Fatalf("budget set --window week = %d %q %q", code, out, errs)
	}
	// The week the list is of: one of the weeks of before and after it.
	week := func() string {
		d := time.Now().UTC().Truncate(24 * time.Hour)
		monday := d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
		return monday.Format(time.DateOnly) + "  " + monday.AddDate(0, 0, 6).Format(time.DateOnly)
	}
	before := week()
	out, errs, code := run(t, dir, "", "budget", "list", "salad")
	after := week()
	if code != 0 || !(strings.Contains(out, before) || strings.Contains(out, after)) {
		t.Errorf("budget list of a weekly budget = %d %q %q, want it FROM its Monday TO its Sunday (%s)", code, out, errs, before)
	}
}

// TestCLI_BudgetListOfWindowsAlone: a box with a window budget and no
// monthly one lists the window's table alone, under no empty monthly
// header.
func TestCLI_BudgetListOfWindowsAlone(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	if out, errs, code := run(t, dir, "", "budget", "set", "salad", "5", "--window", "day"); code != 0 {
		t.Fatalf("budget set --window day = %d %q %q", code, out, errs)
	}
	out, errs, code := run(t, dir, "", "budget", "list", "salad")
	if code != 0 || !strings.HasPrefix(out, "BUDGET  WINDOW") || strings.Contains(out, "RESETS") || strings.Count(out, "\n") != 2 {
		t.Errorf("budget list of a daily budget alone = %d %q %q, want the window table's header and its one row", code, out, errs)
	}
}

// TestCLI_BudgetHoldsRunningBroker: a budget set with the CLI refuses the
// running broker's next call over it.
func TestCLI_BudgetHoldsRunningBroker(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	dir := b.Server.Config.DataDir
	token := b.AddBox("salad")
	b.Report(token, brokertest.Entry("inference", "agent"))
	b.SetCredential("anthropic", "sk-ant-api03-BUDGETTEST")
	if _, errs, code := run(t, dir, "", "budget", "set", "salad", "0.000001"); code != 0 {
		t.Fatalf("budget set = %d %q", code, errs)
	}
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-haiku-4-5","max_tokens":10}`), nil)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(msg, "monthly budget of $0.000001") {
		t.Errorf("a call over a budget set by the CLI = %d %q, want 403 naming the budget", resp.StatusCode, msg)
	}
}

func TestCLI_Spend(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	dir := b.Server.Config.DataDir
	token := b.AddBox("salad")
	b.SetCredential("anthropic", "sk-ant-api03-SPENDCLI")
	month := spend.Month(time.Now())
	report := func(usd float64) {
		body, _ := json.Marshal(map[string]any{
			"capabilities": []any{brokertest.Entry("inference", "agent")},
			"spend":        map[string]any{"month": month, "usd": usd, "runs": 2, "unpriced": 0, "byPrincipal": []any{map[string]any{"principal": nil, "usd": usd, "runs": 2, "unpriced": 0}}},
		})
		if resp := b.Do("POST", "/api/box/declaration", token, body, nil); resp.StatusCode != 200 {
			t.Fatalf("report = %d %s", resp.StatusCode, resp.Body)
		}
	}
	report(5)
	for i := 0; i < 2; i++ {
		if resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10}`), http.Header{"Content-Type": {"application/json"}}); resp.StatusCode != 200 {
			t.Fatalf("messages = %d %s", resp.StatusCode, resp.Body)
		}
	}
	until(t, "two calls recorded", func() bool {
		us, _ := b.Server.Store.ListUsage(context.Background(), "salad", month)
		return len(us) == 1 && us[0].Calls == 2
	})
	// The stand-in reports 12 in, 6 out: 2 × (12×$3 + 6×$15) per million.
	out, errs, code := run(t, dir, "", "spend", "salad")
	for _, want := range []string{"box salad, " + month, "(none)", "$0.000252", "$5.00", "yes", "claude-sonnet-4-5", "shared"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("spend = %d %q %q, want it to hold %q", code, out, errs, want)
		}
	}
	report(0.0003)
	if out, _, _ := run(t, dir, "", "spend", "salad", "--month", month); strings.Contains(out, "yes") {
		t.Errorf("spend with the figures within a cent = %q, want nothing flagged", out)
	}
	if out, _, _ := run(t, dir, "", "spend", "salad", "--month", "2020-01"); !strings.Contains(out, "carried its spend for "+month+", not 2020-01") {
		t.Errorf("spend for another month = %q", out)
	}
	if _, errs, code := run(t, dir, "", "spend", "nobox"); code != 1 || !strings.Contains(errs, "no box named nobox") {
		t.Errorf("spend nobox = %d %q", code, errs)
	}
	if _, errs, code := run(t, dir, "", "spend"); code != 2 || !strings.Contains(errs, "takes one BOX") {
		t.Errorf("spend = %d %q", code, errs)
	}
}
