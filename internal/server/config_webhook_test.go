package server

import (
	"net/url"
	"strings"
	"testing"
)

// TestConfig_WebhookOverPlainHTTPIsRefused: a webhook's URL is often its
// credential (a Slack incoming webhook's path), so a plain http webhook
// URL to another machine is refused, naming the flag and its variable and
// never the URL's path or query; loopback http and https are taken.
func TestConfig_WebhookOverPlainHTTPIsRefused(t *testing.T) {
	const secret = "XsecretPathB0T0"
	hooks := []struct {
		name string
		set  func(c *Config, raw string)
	}{
		{"budget-webhook (BOXBROKER_BUDGET_WEBHOOK)", func(c *Config, raw string) {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			c.BudgetWebhook, c.BudgetWebhookKey = u, []byte("budget-key")
		}},
		{"proposal-webhook (BOXBROKER_PROPOSAL_WEBHOOK)", func(c *Config, raw string) {
			c.ProposalWebhook, c.ProposalWebhookKey = raw, "proposal-key"
		}},
	}
	tests := []struct {
		url     string
		refused bool
	}{
		{"http://hooks.slack.example/services/" + secret, true},
		{"http://10.0.0.5:8080/hook?token=" + secret, true},
		{"http://127.0.0.1:9000/services/" + secret, false},
		{"http://localhost:9000/services/" + secret, false},
		{"http://[::1]:9000/services/" + secret, false},
		{"https://hooks.slack.example/services/" + secret, false},
	}
	for _, h := range hooks {
		for _, tt := range tests {
			c := DefaultConfig()
			h.set(&c, tt.url)
			err := c.Validate()
			refused := err != nil && strings.Contains(err.Error(), "in the clear")
			if refused != tt.refused {
				t.Errorf("Validate() with %s %s = %v; refused %v, want %v", h.name, tt.url, err, refused, tt.refused)
			}
			if refused && !strings.Contains(err.Error(), h.name) {
				t.Errorf("Validate() with %s %s = %v, want it to name %s", h.name, tt.url, err, h.name)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("Validate() with %s quotes the URL's path or query: %v", h.name, err)
			}
		}
	}
}
