package ui_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
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
