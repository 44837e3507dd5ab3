package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServe_SSOFlags reads single sign-on's configuration from flags and
// their environment variables, and the client secret only from the
// environment or a file: no flag takes it.
func TestServe_SSOFlags(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--sso-issuer", "https://id.example.com/realms/ops", "--sso-client-id", "boxbroker",
		"--sso-redirect-url", "https://broker.example.com:8788/ui/sso/callback", "--sso-operators", "a@example.com, b@example.com"}
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantSecret string
		wantErr    string
	}{
		{name: "off"},
		{name: "secret from env", env: map[string]string{"BOXBROKER_SSO_CLIENT_SECRET": "env-secret"}, args: base, wantSecret: "env-secret"},
		{name: "secret from file", args: append([]string{"--sso-client-secret-file", secretFile}, base...), wantSecret: "file-secret"},
		{name: "both", env: map[string]string{"BOXBROKER_SSO_CLIENT_SECRET": "env-secret"}, args: append([]string{"--sso-client-secret-file", secretFile}, base...), wantErr: "set one"},
		{name: "secret in argv", args: append([]string{"--sso-client-secret", "argv-secret"}, base...), wantErr: "not defined"},
		{name: "env only", env: map[string]string{"BOXBROKER_SSO_ISSUER": "https://accounts.google.com", "BOXBROKER_SSO_CLIENT_ID": "x.apps.googleusercontent.com",
			"BOXBROKER_SSO_REDIRECT_URL": "https://broker.example.com/ui/sso/callback", "BOXBROKER_SSO_VIEWERS": "*"}},
		{name: "bad redirect path", args: []string{"--sso-issuer", "https://id.example.com", "--sso-client-id", "c",
			"--sso-redirect-url", "https://broker.example.com/callback", "--sso-viewers", "*"}, wantErr: "sso-redirect-url"},
		{name: "plain http issuer", args: []string{"--sso-issuer", "http://id.example.com", "--sso-client-id", "c",
			"--sso-redirect-url", "https://broker.example.com/ui/sso/callback", "--sso-viewers", "*"}, wantErr: "not https"},
		{name: "no roles", args: []string{"--sso-issuer", "https://id.example.com", "--sso-client-id", "c",
			"--sso-redirect-url", "https://broker.example.com/ui/sso/callback"}, wantErr: "nobody could sign in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cli{stderr: io.Discard, getenv: func(k string) string { return tt.env[k] }}
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			config := ssoFlags(fs, c)
			err := fs.Parse(tt.args)
			if err == nil {
				got, cerr := config()
				err = cerr
				if err == nil && got.ClientSecret != tt.wantSecret {
					t.Errorf("client secret = %q, want %q", got.ClientSecret, tt.wantSecret)
				}
				if err == nil && tt.name == "secret from env" && (len(got.Operators) != 2 || got.Operators[1] != "b@example.com" || got.RoleClaim != "email") {
					t.Errorf("operators %q, claim %q", got.Operators, got.RoleClaim)
				}
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("ssoFlags(%q) = %v, want no error", tt.args, err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("ssoFlags(%q) = %v, want an error with %q", tt.args, err, tt.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "env-secret") || strings.Contains(err.Error(), "file-secret")) {
				t.Errorf("error %q holds the secret", err)
			}
		})
	}
}
