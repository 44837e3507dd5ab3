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
