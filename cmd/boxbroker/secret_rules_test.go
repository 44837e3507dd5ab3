package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestCLI_SecretRulesRoundTrip: `secret set --allow ... --rate`, on the
// store and through the admin API, keeps the rules and rate with the
// secret (written as the broker reads them), `secret list` shows them,
// the change is in the audit log, setting the secret again without them
// allows everything again, and a rule or rate that is no such thing is
// refused saying why.
func TestCLI_SecretRulesRoundTrip(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("shop")
	const value = "ghp_CLIRULESVALUE0123456789"
	for _, tt := range storeAndAdminAPI(t, b) {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, tt.env, value+"\n", "secret", "set", "shop", "GITHUB", "--host", "https://api.github.com",
				"--allow", "get /repos/acme/**", "--allow", "POST /repos/acme/*/issues", "--rate", "120/m")
			if code != 0 {
				t.Fatalf("secret set --allow --rate = %d %s", code, errs)
			}
			if !strings.Contains(out, "GITHUB allows only GET /repos/acme/** and POST /repos/acme/*/issues, at most 120/m for each box") {
				t.Errorf("secret set printed %q, want it to name the rules and rate", out)
			}
			want := []string{"GET /repos/acme/**", "POST /repos/acme/*/issues"}
			sec, err := b.Server.Store.Secret(t.Context(), "shop", "GITHUB")
			if err != nil || !slices.Equal(sec.Rules, want) || sec.Rate != "120/m" {
				t.Errorf("stored GITHUB's rules = %q %q, %v, want %q 120/m", sec.Rules, sec.Rate, err, want)
			}
			code, out, errs = runEnv(t, tt.env, "", "secret", "list", "shop")
			if code != 0 || !strings.Contains(out, "ALLOWS") || !strings.Contains(out, "GET /repos/acme/**; POST /repos/acme/*/issues") || !strings.Contains(out, "120/m") {
				t.Errorf("secret list = %d %q %q, want GITHUB's rules and rate", code, out, errs)
			}
			if strings.Contains(out+errs, value) {
				t.Errorf("secret list printed the value")
			}
			entries, err := b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "shop", Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			audited := false
			for _, e := range entries {
				audited = audited || strings.Contains(e.Message, "GITHUB") && strings.Contains(e.Message, "POST /repos/acme/*/issues") && strings.Contains(e.Message, "120/m")
				if strings.Contains(e.Message, value) {
					t.Errorf("audit entry %q holds the value", e.Message)
				}
			}
			if !audited {
				t.Errorf("no audit entry names GITHUB's rules and rate")
			}

			if code, _, errs := runEnv(t, tt.env, value+"\n", "secret", "set", "shop", "GITHUB", "--host", "https://api.github.com"); code != 0 {
				t.Fatalf("secret set again = %d %s", code, errs)
			}
			if sec, err := b.Server.Store.Secret(t.Context(), "shop", "GITHUB"); err != nil || sec.Rules != nil || sec.Rate != "" {
				t.Errorf("GITHUB set again without rules = %q %q, %v, want none", sec.Rules, sec.Rate, err)
			}

			bad := []struct {
				name, flag, arg, says string
			}{
				{"no pattern", "--allow", "GET", "METHOD PATTERN"},
				{"no leading slash", "--allow", "GET repos/**", "beginning with /"},
				{"** not last", "--allow", "GET /**/issues", "must come last"},
				{"part of a segment", "--allow", "GET /repos/ac*", "whole segment"},
				{"encoded", "--allow", "GET /repos/acme%2Fx", "decoded"},
				{"rate without a period", "--rate", "120", "N/PERIOD"},
				{"rate of a day", "--rate", "120/d", "s, m or h"},
			}
			for _, bt := range bad {
				code, _, errs := runEnv(t, tt.env, value+"\n", "secret", "set", "shop", "OTHER", "--host", "https://x.example", bt.flag, bt.arg)
				if code != 2 || !strings.Contains(errs, bt.says) {
					t.Errorf("%s: secret set %s %q = %d %q, want 2 saying %q", bt.name, bt.flag, bt.arg, code, errs, bt.says)
				}
			}
		})
	}
}
