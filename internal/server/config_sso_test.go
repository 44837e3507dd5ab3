package server_test

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/sso"
)

// TestConfig_SSORedirectHostIsAnswered refuses a single sign-on redirect
// URL whose host the admin listener would refuse (421), and one with the
// admin listener off.
func TestConfig_SSORedirectHostIsAnswered(t *testing.T) {
	ssoFor := func(redirect string) sso.Config {
		return sso.Config{Issuer: "https://id.example.com", ClientID: "c", RedirectURL: redirect, Viewers: []string{"*"}}
	}
	tests := []struct {
		name    string
		cfg     server.Config
		wantErr string
	}{
		{"named in admin-hosts", server.Config{AdminHosts: []string{"Broker.Example.com"}, SSO: ssoFor("https://broker.example.com/ui/sso/callback")}, ""},
		{"an IP address", server.Config{SSO: ssoFor("http://127.0.0.1:8788/ui/sso/callback")}, ""},
		{"a host not answered", server.Config{SSO: ssoFor("https://broker.example.com/ui/sso/callback")}, "admin-hosts"},
		{"admin off", server.Config{AdminListen: "off", SSO: ssoFor("https://broker.example.com/ui/sso/callback")}, "admin-listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Defaults()
			err := cfg.Validate()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}
