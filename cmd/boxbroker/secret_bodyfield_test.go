package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestCLI_SecretBodyFields: `secret set --body-field` (repeatable), on
// the store and through the admin API, keeps the fields with the secret,
// `secret list` shows them, and a field that is no sane name, one named
// twice, or one too many is refused saying why.
func TestCLI_SecretBodyFields(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("shop")
	const value = "cs_CLIBODYFIELDVALUE123"
	for _, tt := range storeAndAdminAPI(t, b) {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, tt.env, value+"\n", "secret", "set", "shop", "OAUTH", "--host", "https://auth.example.com",
				"--body-field", "client_secret", "--body-field", "api_key")
			if code != 0 {
				t.Fatalf("secret set --body-field = %d %s", code, errs)
			}
			if !strings.Contains(out, "client_secret, api_key") {
				t.Errorf("secret set printed %q, want it to name the body fields", out)
			}
			sec, err := b.Server.Store.Secret(t.Context(), "shop", "OAUTH")
			if err != nil || !slices.Equal(sec.BodyFields, []string{"client_secret", "api_key"}) {
				t.Errorf("stored OAUTH's body fields = %q, %v, want [client_secret api_key]", sec.BodyFields, err)
			}
			code, out, errs = runEnv(t, tt.env, "", "secret", "list", "shop")
			if code != 0 || !strings.Contains(out, "BODY FIELDS") || !strings.Contains(out, "client_secret,api_key") {
				t.Errorf("secret list = %d %q %q, want OAUTH's body fields", code, out, errs)
			}
			if strings.Contains(out+errs, value) {
				t.Errorf("secret list printed the value")
			}
			nine := []string{"secret", "set", "shop", "OTHER", "--host", "https://x.example"}
			for _, f := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
				nine = append(nine, "--body-field", f)
			}
			bad := []struct {
				name string
				args []string
				says string
			}{
				{"a space", []string{"secret", "set", "shop", "OTHER", "--host", "https://x.example", "--body-field", "client secret"}, "must match"},
				{"named twice", []string{"secret", "set", "shop", "OTHER", "--host", "https://x.example", "--body-field", "key", "--body-field", "key"}, "twice"},
				{"too many", nine, "at most 8"},
			}
			if tt.name == "store" {
				// A signing kind writes no value, so it names no field.
				bad = append(bad, struct {
					name string
					args []string
					says string
				}{"a signing kind", []string{"secret", "set", "shop", "SIGNED", "--host", "https://x.example", "--kind", "hmac", "--body-field", "key"}, "takes no body field"})
			}
			for _, bt := range bad {
				stdin := value + "\n"
				if bt.name == "a signing kind" {
					stdin = `{"key":"hmac-key-0123456789abcdef","header":"X-Signature"}`
				}
				code, _, errs := runEnv(t, tt.env, stdin, bt.args...)
				if code != 2 || !strings.Contains(errs, bt.says) {
					t.Errorf("%s: secret set = %d %q, want 2 saying %q", bt.name, code, errs, bt.says)
				}
			}
		})
	}
}
