package admin_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAdmin_SecretRules: PUT .../secrets/{secret}/rules sets a held
// secret's rules and rate alone, keeping its value (sealed as it was),
// host and body fields, answers the secret's view and never its value,
// and clears them with an empty body; a bad rule, a bad rate, a value or
// any field it does not take is a 400 saying what is wrong, a secret or
// box that is not there a 404, and no admin token a 401.
func TestAdmin_SecretRules(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	b.AddBox("alpha")
	const value = "ghp_RULESVALUE0123456789"
	b.SetSecret("alpha", "GITHUB", "https://api.github.com", value, "token")
	before, err := b.Server.Store.Secret(t.Context(), "alpha", "GITHUB")
	if err != nil {
		t.Fatal(err)
	}

	var sv operator.SecretView
	resp := b.Admin("PUT", "/api/boxes/alpha/secrets/GITHUB/rules", tok, admin.SecretRules{Rules: []string{"get /repos/acme/**"}, Rate: "60/m"})
	decode(t, "PUT GITHUB rules", resp, 200, &sv)
	if sv.Name != "GITHUB" || sv.Host != "https://api.github.com" || !slices.Equal(sv.Rules, []string{"GET /repos/acme/**"}) || sv.Rate != "60/m" || !slices.Equal(sv.BodyFields, []string{"token"}) {
		t.Errorf("PUT GITHUB rules = %+v, want GITHUB at its host with its body field, GET /repos/acme/** and 60/m", sv)
	}
	if bytes.Contains(resp.Body, []byte(value)) {
		t.Errorf("PUT GITHUB rules answered the value: %s", resp.Body)
	}
	sec, err := b.Server.Store.Secret(t.Context(), "alpha", "GITHUB")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sec.Sealed, before.Sealed) || sec.Host != before.Host || !slices.Equal(sec.BodyFields, before.BodyFields) {
		t.Errorf("stored GITHUB = %+v, want its sealed value, host and body fields kept", sec)
	}
	if pt, err := b.Server.Keyring.Open(sec.Sealed, secrets.SecretAD("alpha", "GITHUB")); err != nil || string(pt) != value {
		t.Errorf("GITHUB opens to %d bytes, %v, want the value set", len(pt), err)
	}
	if !slices.Equal(sec.Rules, []string{"GET /repos/acme/**"}) || sec.Rate != "60/m" {
		t.Errorf("stored GITHUB's rules = %q %q, want GET /repos/acme/** 60/m", sec.Rules, sec.Rate)
	}
	rows, err := b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "alpha", Limit: 1})
	if want := operator.RulesMessage("GITHUB", []string{"GET /repos/acme/**"}, "60/m") + byToken(t, b, b.AdminToken); err != nil || len(rows) != 1 || rows[0].Message != want ||
		rows[0].Route != "/api/boxes/{name}/secrets/{secret}/rules" {
		t.Errorf("audit = %+v, %v, want %q by the rules route", rows, err, want)
	}

	var cleared operator.SecretView
	decode(t, "PUT GITHUB rules {}", b.Admin("PUT", "/api/boxes/alpha/secrets/GITHUB/rules", tok, map[string]any{}), 200, &cleared)
	if cleared.Name != "GITHUB" || cleared.Rules != nil || cleared.Rate != "" {
		t.Errorf("PUT GITHUB rules {} = %+v, want no rules and no rate", cleared)
	}
	if sec, err := b.Server.Store.Secret(t.Context(), "alpha", "GITHUB"); err != nil || len(sec.Rules) != 0 || sec.Rate != "" || !bytes.Equal(sec.Sealed, before.Sealed) {
		t.Errorf("GITHUB after {} = %q %q, %v, want no rules, no rate, its value kept", sec.Rules, sec.Rate, err)
	}

	tests := []struct {
		name, path string
		body       any
		status     int
		says       string
	}{
		{"no pattern", "/api/boxes/alpha/secrets/GITHUB/rules", admin.SecretRules{Rules: []string{"GET"}}, 400, "METHOD PATTERN"},
		{"no leading slash", "/api/boxes/alpha/secrets/GITHUB/rules", admin.SecretRules{Rules: []string{"GET repos/**"}}, 400, "beginning with /"},
		{"a rate of a day", "/api/boxes/alpha/secrets/GITHUB/rules", admin.SecretRules{Rate: "5/d"}, 400, "s, m or h"},
		{"a value", "/api/boxes/alpha/secrets/GITHUB/rules", map[string]any{"value": value}, 400, `unknown field "value"`},
		{"rules not a list", "/api/boxes/alpha/secrets/GITHUB/rules", map[string]any{"rules": "GET /x"}, 400, `field "rules" has the wrong type`},
		{"a bad name", "/api/boxes/alpha/secrets/github/rules", admin.SecretRules{}, 400, "A secret name matches"},
		{"no such secret", "/api/boxes/alpha/secrets/STRIPE/rules", admin.SecretRules{}, 404, "no secret named STRIPE"},
		{"no such box", "/api/boxes/nobox/secrets/GITHUB/rules", admin.SecretRules{}, 404, "no secret named GITHUB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Admin("PUT", tt.path, tok, tt.body)
			if msg := refusal(t, "PUT "+tt.path, resp, tt.status); !strings.Contains(msg, tt.says) {
				t.Errorf("PUT %s %v = %q, want it to say %q", tt.path, tt.body, msg, tt.says)
			}
			if bytes.Contains(resp.Body, []byte(value)) {
				t.Errorf("PUT %s answered the value: %s", tt.path, resp.Body)
			}
		})
	}
	refusal(t, "PUT GITHUB rules with no token", b.Admin("PUT", "/api/boxes/alpha/secrets/GITHUB/rules", "", admin.SecretRules{Rate: "1/s"}), 401)
	if sec, err := b.Server.Store.Secret(t.Context(), "alpha", "GITHUB"); err != nil || len(sec.Rules) != 0 || sec.Rate != "" {
		t.Errorf("GITHUB after the refusals = %q %q, %v, want none set", sec.Rules, sec.Rate, err)
	}
}
