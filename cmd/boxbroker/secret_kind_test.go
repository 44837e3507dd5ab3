package main

import (
	"strings"
	"testing"
)

func TestCLI_SecretKinds(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := run(t, dir, "", "box", "add", "shop"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	const clientSecret = "cs_CLITESTCLIENTSECRET"
	good := `{"token_url":"https://auth.example.com/token","client_id":"c1","client_secret":"` + clientSecret + `","refresh_token":"rt_CLITESTREFRESH"}`
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		says  string
	}{
		{"unknown kind", good, []string{"secret", "set", "shop", "API", "--host", "https://api.example.com", "--kind", "magic"}, 1, "unknown kind"},
		{"not https", strings.Replace(good, "https://auth", "http://auth", 1), []string{"secret", "set", "shop", "API", "--host", "https://api.example.com", "--kind", "oauth2"}, 1, `"token_url" must be an https:// URL`},
		{"missing field", `{"token_url":"https://auth.example.com/token","client_secret":"` + clientSecret + `"}`, []string{"secret", "set", "shop", "API", "--host", "https://api.example.com", "--kind", "oauth2"}, 1, `"client_id" is missing`},
		{"no configuration", "", []string{"secret", "set", "shop", "API", "--host", "https://api.example.com", "--kind", "oauth2"}, 1, "not one JSON object"},
		{"unknown region", `{"access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"k","region":"mars-1","service":"s3"}`, []string{"secret", "set", "shop", "S3", "--host", "https://s3.amazonaws.com", "--kind", "aws-sigv4"}, 1, `"region"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := run(t, dir, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.says) {
				t.Errorf("boxbroker %q = %d %q, want %d saying %q", tt.args, code, errs, tt.code, tt.says)
			}
			if strings.Contains(out+errs, clientSecret) {
				t.Errorf("boxbroker %q printed the client secret", tt.args)
			}
		})
	}
	out, errs, code := run(t, dir, good, "secret", "set", "shop", "API", "--host", "https://api.example.com", "--kind", "oauth2")
	if code != 0 || !strings.Contains(out, "kind oauth2") {
		t.Fatalf("secret set --kind oauth2 = %d %q %q", code, out, errs)
	}
	out, _, code = run(t, dir, "", "secret", "list", "shop")
	if code != 0 || !strings.Contains(out, "oauth2") || !strings.Contains(out, "not minted yet") || strings.Contains(out, clientSecret) {
		t.Errorf("secret list = %d %q, want API as oauth2, not minted yet, no value", code, out)
	}
}
