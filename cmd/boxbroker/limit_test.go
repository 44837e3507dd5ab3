package main

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestCLI_WindowBudgetAndRateLimit sets a day's budget and a rate limit
// on a running broker's box with the CLI, and sees each hold its calls.
func TestCLI_WindowBudgetAndRateLimit(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	dir := b.Server.Config.DataDir
	token := b.AddBox("salad")
	b.Report(token, brokertest.Entry("inference", "agent"))
	b.SetCredential("anthropic", "sk-ant-api03-LIMITTEST")
	messages := func() (int, string, string) {
		resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-haiku-4-5","max_tokens":10}`), nil)
		_, msg := brokertest.Refusal(resp.Body)
		return resp.StatusCode, msg, resp.Header.Get("Retry-After")
	}

	out, errs, code := run(t, dir, "", "limit", "set", "salad", "--rpm", "1")
	if code != 0 || !strings.Contains(out, "1 requests a minute") {
		t.Fatalf("limit set = %d %q %q", code, out, errs)
	}
	out, errs, code = run(t, dir, "", "limit", "list", "salad")
	if code != 0 || !strings.Contains(out, "box") || !strings.Contains(out, "RPM") {
		t.Fatalf("limit list = %d %q %q", code, out, errs)
	}
	var msg, retry string
	until(t, "a second call in the minute refused", func() bool {
		var code int
		code, msg, retry = messages()
		return code == 429
	})
	if retry == "" || !strings.Contains(msg, "requests a minute") {
		t.Errorf("rate refusal = %q (Retry-After %q), want the requests a minute and a Retry-After", msg, retry)
	}
	if out, errs, code = run(t, dir, "", "limit", "remove", "salad", "--yes"); code != 0 {
		t.Fatalf("limit remove = %d %q %q", code, out, errs)
	}
	until(t, "calls admitted once the limit is removed", func() bool {
		code, _, _ := messages()
		return code == 200
	})

	out, errs, code = run(t, dir, "", "budget", "set", "salad", "0.000001", "--window", "day")
	if code != 0 || !strings.Contains(out, "daily budget") {
		t.Fatalf("budget set --window day = %d %q %q", code, out, errs)
	}
	code, msg, _ = messages()
	if code != 403 || !strings.Contains(msg, "daily budget") {
		t.Errorf("a call past the day's budget = %d %q, want 403 naming the daily budget", code, msg)
	}
	out, errs, code = run(t, dir, "", "budget", "list", "salad")
	if code != 0 || !strings.Contains(out, "day") {
		t.Errorf("budget list = %d %q %q, want the day's budget listed", code, out, errs)
	}
	if _, _, code = run(t, dir, "", "budget", "set", "salad", "1", "--window", "fortnight"); code != 2 {
		t.Errorf("budget set --window fortnight = %d, want 2", code)
	}
}
