package server_test

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/server"
)

// TestConfig_KeyInTheWrongSettingIsNeverShown: a key put in a setting
// that takes an address, a word or a name (BOXBROKER_LOG_LEVEL,
// BOXBROKER_FEEDBACK, BOXBROKER_LISTEN …, a line of an environment file
// off by one) is refused naming the setting, never the value; a mistyped
// value is still quoted.
func TestConfig_KeyInTheWrongSettingIsNeverShown(t *testing.T) {
	const key = "sk-ant-api03-Xset1" + "AbCdEfGh0123456789AbCdEfGh0123456789"
	set := map[string]func(*server.Config){
		"listen":                 func(c *server.Config) { c.Listen = key },
		"admin-listen":           func(c *server.Config) { c.AdminListen = key },
		"admin-hosts":            func(c *server.Config) { c.AdminHosts = []string{key + "/x"} },
		"broker word":            func(c *server.Config) { c.Broker = key + " x" },
		"proposal-webhook-shape": func(c *server.Config) { c.ProposalWebhookShape = key },
		"feedback":               func(c *server.Config) { c.Feedback = key },
		"log level":              func(c *server.Config) { c.LogLevel = key },
	}
	for name, f := range set {
		c := server.DefaultConfig()
		f(&c)
		err := c.Validate()
		if err == nil || strings.Contains(err.Error(), "Xset1") || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "not shown") {
			t.Errorf("Validate with a key as %s = %v; want a refusal naming it, never the key", name, err)
		}
	}
	c := server.DefaultConfig()
	c.LogLevel = "verbose"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `log level "verbose"`) {
		t.Errorf("Validate with log level verbose = %v, want the value quoted", err)
	}
}
