package server

import (
	"net/url"
	"strings"
	"testing"
)

// The audit sink's bearer token never crosses the network in the clear:
// a plain http sink URL with a token is refused unless its host is this
// machine's loopback.
func TestConfig_AuditSinkTokenOverPlainHTTPIsRefused(t *testing.T) {
	for _, tt := range []struct {
		url, token string
		refused    bool
	}{
		{"http://logs.example.com/audit", "sink-token-1234", true},
		{"http://10.0.0.5:8080/audit", "sink-token-1234", true},
		{"http://127.0.0.1:9000/audit", "sink-token-1234", false},
		{"http://localhost:9000/audit", "sink-token-1234", false},
		{"http://[::1]:9000/audit", "sink-token-1234", false},
		{"https://logs.example.com/audit", "sink-token-1234", false},
		{"http://logs.example.com/audit", "", false},
	} {
		c := DefaultConfig()
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		c.AuditSinkURL, c.AuditSinkToken = u, tt.token
		err = c.Validate()
		refused := err != nil && strings.Contains(err.Error(), "in the clear")
		if refused != tt.refused {
			t.Errorf("Validate() with %s and token %q = %v; refused %v, want %v", tt.url, tt.token, err, refused, tt.refused)
		}
		if err != nil && tt.token != "" && strings.Contains(err.Error(), tt.token) {
			t.Errorf("Validate() quotes the token: %v", err)
		}
	}
}

// TestConfig_RefusedURLIsNotQuoted: a URL refused at start is shown
// without its user information or query, which may hold the credential
// an operator pasted there (a key in ?key=, a password).
func TestConfig_RefusedURLIsNotQuoted(t *testing.T) {
	const secret = "sk-ant-api03-PASTED-INTO-URL-4c1e"
	for _, tt := range []struct {
		name string
		set  func(c *Config, u *url.URL)
		raw  string
	}{
		{"anthropic-url", func(c *Config, u *url.URL) { c.AnthropicURL = u }, "https://api.example.com/v1?key=" + secret},
		{"fountain-url", func(c *Config, u *url.URL) { c.FountainURL = u }, "https://user:" + secret + "@fountain.example.com/"},
		{"audit-sink-url", func(c *Config, u *url.URL) { c.AuditSinkURL = u }, "ftp://logs.example.com/in?key=" + secret},
	} {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatal(err)
		}
		c := DefaultConfig()
		tt.set(&c, u)
		err = c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.name) {
			t.Fatalf("Validate() with %s %s = %v, want it refused", tt.name, tt.raw, err)
		}
		if strings.Contains(err.Error(), "PASTED") {
			t.Errorf("Validate() quotes what the %s carried: %v", tt.name, err)
		}
	}
}
