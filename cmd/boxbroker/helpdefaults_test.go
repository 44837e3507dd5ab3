package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCLI_HelpNeverShowsACredentialFromTheEnvironment: -h shows each
// flag's default, which a BOXBROKER_* variable sets; a URL there may hold
// a credential (a store's password, a Slack webhook's path, a sink's
// query), so -h shows such a default only as its scheme and host.
func TestCLI_HelpNeverShowsACredentialFromTheEnvironment(t *testing.T) {
	env := map[string]string{
		"BOXBROKER_DATA":             t.TempDir(),
		"BOXBROKER_STORE":            "postgres://u:Xpass1@db.example/boxbroker",
		"BOXBROKER_PROPOSAL_WEBHOOK": "https://hooks.slack.com/services/T0/B0/Xslack2",
		"BOXBROKER_BUDGET_WEBHOOK":   "https://alerts.example/hook?key=Xquery3",
		"BOXBROKER_AUDIT_SINK_URL":   "https://logs.example/audit?token=Xsink4",
		"BOXBROKER_URL":              "https://broker.example/?k=Xurl5",
		"BOXBROKER_ADMIN_URL":        "https://admin.example/Xadmin6",
	}
	for _, args := range [][]string{{"serve", "-h"}, {"box", "list", "-h"}, {"report", "-h"}, {"prices", "-h"}, {"ready", "-h"}, {"secret", "set", "-h"}} {
		var out, errb bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
		c.main(context.Background(), args)
		if got := out.String() + errb.String(); strings.Contains(got, "Xpass1") || strings.Contains(got, "Xslack2") || strings.Contains(got, "Xquery3") ||
			strings.Contains(got, "Xsink4") || strings.Contains(got, "Xurl5") || strings.Contains(got, "Xadmin6") {
			t.Errorf("boxbroker %s shows a credential from the environment:\n%s", strings.Join(args, " "), got)
		}
	}
	// A URL that does not parse is refused without being repeated.
	env["BOXBROKER_BUDGET_WEBHOOK"] = "https://alerts.example/%zzXbad7"
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
	if code := c.main(context.Background(), []string{"serve"}); code == 0 || strings.Contains(errb.String(), "Xbad7") || !strings.Contains(errb.String(), "--budget-webhook") {
		t.Errorf("boxbroker serve with a bad BOXBROKER_BUDGET_WEBHOOK = %d %q, want it refused naming the flag, not the URL", code, errb.String())
	}
	if got := helpDefault("postgres://u:p@db.example:5432/boxbroker?sslmode=require"); got != "postgres://db.example:5432/…" {
		t.Errorf("helpDefault(a store URL) = %q, want postgres://db.example:5432/…", got)
	}
	for _, v := range []string{"", "127.0.0.1:8787", "https://api.anthropic.com", "json", "12h", "/var/lib/boxbroker"} {
		if got := helpDefault(v); got != v {
			t.Errorf("helpDefault(%q) = %q, want it as it is", v, got)
		}
	}
}
