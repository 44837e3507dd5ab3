package ui_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_SecretFormKeepsRules: the box's page shows each secret's rules
// and rate, and a value set again from the page keeps them, so that
// setting a value never widens what the secret may be spent on.
func TestUI_SecretFormKeepsRules(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	cookie, csrf := signedInForm(t, b)
	b.SetSecret("alpha", "GITHUB", "https://api.github.com", "ghp_0123456789-value")
	rules := []string{"GET /repos/acme/**", "POST /repos/acme/*/issues"}
	b.SetSecretRules("alpha", "GITHUB", rules, "120/m")
	p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	for _, w := range []string{"GET /repos/acme/**", "POST /repos/acme/*/issues", "at most 120/m for each box"} {
		if !strings.Contains(p.body, w) {
			t.Errorf("alpha's page does not show %q", w)
		}
	}
	form := url.Values{"csrf": {csrf}, "name": {"GITHUB"}, "host": {"https://api.github.com"}, "value": {"ghp_replaced-value-0123"}}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets", cookie, form, nil); p.status != 303 {
		t.Fatalf("replace GITHUB = %d, want 303", p.status)
	}
	if sec, err := b.Server.Store.Secret(context.Background(), "alpha", "GITHUB"); err != nil || !slices.Equal(sec.Rules, rules) || sec.Rate != "120/m" {
		t.Errorf("GITHUB's rules after the form = %q %q, %v, want %q 120/m kept", sec.Rules, sec.Rate, err, rules)
	}
}

// TestUI_SecretRulesForm sets a secret's rules and rate from the page,
// checked as the CLI checks them, keeping its value, and audited.
func TestUI_SecretRulesForm(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	cookie, csrf := signedInForm(t, b)
	b.SetSecret("alpha", "GITHUB", "https://api.github.com", "ghp_0123456789-value")
	before, err := b.Server.Store.Secret(context.Background(), "alpha", "GITHUB")
	if err != nil {
		t.Fatal(err)
	}
	bad := url.Values{"csrf": {csrf}, "rules": {"GET repos"}, "rate": {""}}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets/GITHUB/rules", cookie, bad, nil); p.status != 400 || !strings.Contains(p.body, "beginning with /") {
		t.Errorf("a rule with no leading / = %d, want 400 saying so", p.status)
	}
	form := url.Values{"csrf": {csrf}, "rules": {"get /repos/acme/**\r\n\r\nPOST /repos/acme/*/issues\r\n"}, "rate": {"5/s"}}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets/GITHUB/rules", cookie, form, nil); p.status != 303 {
		t.Fatalf("set GITHUB's rules = %d, want 303", p.status)
	}
	sec, err := b.Server.Store.Secret(context.Background(), "alpha", "GITHUB")
	want := []string{"GET /repos/acme/**", "POST /repos/acme/*/issues"}
	if err != nil || !slices.Equal(sec.Rules, want) || sec.Rate != "5/s" || string(sec.Sealed) != string(before.Sealed) || sec.Host != before.Host {
		t.Errorf("GITHUB after the rules form = %q %q, %v, want %q 5/s and its value and host kept", sec.Rules, sec.Rate, err, want)
	}
	entries, err := b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Box: "alpha", Limit: 20})
	if err != nil || len(entries) == 0 || !strings.Contains(entries[0].Message, "POST /repos/acme/*/issues") || !strings.Contains(entries[0].Message, "5/s") {
		t.Errorf("alpha's newest audit entry = %v, %v, want GITHUB's rules and rate", entries, err)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets/NONE/rules", cookie, form, nil); p.status != 404 {
		t.Errorf("rules of a secret not held = %d, want 404", p.status)
	}
}

// TestUI_SecretRulesBadNameIsTheServicesRefusal: the rules form of a
// secret name that is none is refused in the operator service's words,
// as the admin API and the CLI refuse it, and changes nothing.
func TestUI_SecretRulesBadNameIsTheServicesRefusal(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	cookie, csrf := signedInForm(t, b)
	want := operator.CheckSecretName("github").Error()
	form := url.Values{"csrf": {csrf}, "rules": {"GET /repos/**"}, "rate": {""}}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets/github/rules", cookie, form, nil); p.status != 400 || !strings.Contains(p.body, want) {
		t.Errorf("the rules of secret github = %d %q, want 400 saying %q", p.status, p.body, want)
	}
}
