package egressproxy_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/proxy"
)

// TestProxy_TokenInABlobNeverBecomesTheValue is issue 40's blob attack
// in an intercepted tunnel: the box writes its token into a body the
// host keeps (plain text, a JSON string among other words, a form field
// the secret does not name), and the host receives a marker of the
// token's length, never the value. A field the secret names
// (--body-field client_secret), whose whole value is the token, receives
// the value, in a form and in JSON.
func TestProxy_TokenInABlobNeverBecomesTheValue(t *testing.T) {
	f := newFixture(t)
	f.b.SetSecret("shop", "API", "https://"+f.host, secretValue, "client_secret")
	marker := proxy.TokenMarker(len(f.token))
	tests := []struct {
		name, ctype, body, want string
	}{
		{"plain text", "text/plain", "GITHUB_KEY=" + f.token + "\n", "GITHUB_KEY=" + marker + "\n"},
		{"json string among other words", "application/json", `{"content":"my key is ` + f.token + `"}`, `{"content":"my key is ` + marker + `"}`},
		{"form field not named", "application/x-www-form-urlencoded", "note=" + f.token, "note=" + marker},
		{"form field named", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_secret=" + f.token, "grant_type=client_credentials&client_secret=" + url.QueryEscape(secretValue)},
		{"json field named", "application/json", `{"client_secret":"` + f.token + `"}`, `{"client_secret":"` + secretValue + `"}`},
	}
	c := f.client(t, f.token, f.caPool, false)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "https://"+f.host+"/blobs", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tt.ctype)
			status, body := send(t, c, req)
			if status != http.StatusOK {
				t.Fatalf("POST in the tunnel = %d %s, want 200", status, body)
			}
			f.up.mu.Lock()
			seen := f.up.seen[len(f.up.seen)-1]
			f.up.mu.Unlock()
			_, got, _ := strings.Cut(seen, "\n\n")
			if got != tt.want {
				t.Errorf("the host received %q, want %q", got, tt.want)
			}
			if strings.Contains(string(body), secretValue) {
				t.Errorf("the tunnel's answer carries the value: %s", body)
			}
		})
	}
}
