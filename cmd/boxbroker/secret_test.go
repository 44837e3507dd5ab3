package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

func TestCLI_Secrets(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := run(t, dir, "", "box", "add", "shop"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	const value = "sk_live_CLITESTVALUE123"
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		says  string
	}{
		{"lower-case name", value, []string{"secret", "set", "shop", "stripe", "--host", "https://api.stripe.com"}, 2, "must match ^[A-Z][A-Z0-9_]{0,39}$"},
		{"name with a hyphen", value, []string{"secret", "set", "shop", "STRIPE-LIVE", "--host", "https://api.stripe.com"}, 2, "must match"},
		{"41-character name", value, []string{"secret", "set", "shop", strings.Repeat("A", 41), "--host", "https://api.stripe.com"}, 2, "must match"},
		{"no host", value, []string{"secret", "set", "shop", "STRIPE"}, 2, "needs --host"},
		{"userinfo", value, []string{"secret", "set", "shop", "STRIPE", "--host", "https://u:p@api.stripe.com"}, 2, "user or password"},
		{"userinfo, said of --host", value, []string{"secret", "set", "shop", "STRIPE", "--host", "https://u:p@api.stripe.com"}, 2, "usage: --host: the host must not hold a user or password"},
		{"query", value, []string{"secret", "set", "shop", "STRIPE", "--host", "https://api.stripe.com/?a=1"}, 2, "query"},
		{"fragment", value, []string{"secret", "set", "shop", "STRIPE", "--host", "https://api.stripe.com/#x"}, 2, "fragment"},
		{"scheme", value, []string{"secret", "set", "shop", "STRIPE", "--host", "ftp://api.stripe.com"}, 2, "https://"},
		{"value in argv", "", []string{"secret", "set", "shop", "STRIPE", value, "--host", "https://api.stripe.com"}, 2, "never from arguments"},
		{"no value", "", []string{"secret", "set", "shop", "STRIPE", "--host", "https://api.stripe.com"}, 1, "no value on stdin"},
		{"short value", "short\n", []string{"secret", "set", "shop", "STRIPE", "--host", "https://api.stripe.com"}, 1, "shorter than 8 bytes"},
		{"control character", "sk_live_\x01abcdef\n", []string{"secret", "set", "shop", "STRIPE", "--host", "https://api.stripe.com"}, 1, "control character"},
		{"no such box", value, []string{"secret", "set", "nobox", "STRIPE", "--host", "https://api.stripe.com"}, 1, "no box named nobox"},
		{"list of no such box", "", []string{"secret", "list", "nobox"}, 1, "no box named nobox"},
		{"unknown command", "", []string{"secret", "show", "shop"}, 2, "unknown secret command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := run(t, dir, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.says) {
				t.Errorf("boxbroker %q = %d %q, want %d saying %q", tt.args, code, errs, tt.code, tt.says)
			}
			if strings.Contains(out+errs, value) {
				t.Errorf("boxbroker %q printed the value", tt.args)
			}
		})
	}

	out, errs, code := run(t, dir, value+"\n", "secret", "set", "shop", "STRIPE", "--host", "https://API.stripe.com/v1/", "--url", "https://broker.example/")
	if code != 0 {
		t.Fatalf("secret set = %d %q", code, errs)
	}
	for _, want := range []string{"STRIPE_KEY=<the box's token>", "STRIPE_BASE_URL=https://broker.example/egress/STRIPE", "https://api.stripe.com/v1", `"scope": ["STRIPE"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("secret set printed %q, want it to hold %q", out, want)
		}
	}
	if strings.Contains(out+errs, value) {
		t.Errorf("secret set printed the value")
	}
	// The value is sealed at rest, bound to its box and name.
	st, err := sqlite.Open(filepath.Join(dir, "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := st.Secret(context.Background(), "shop", "STRIPE")
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sec.Sealed), value) || sec.Host != "https://api.stripe.com/v1" {
		t.Errorf("stored secret: host %q, sealed holds the value: %v", sec.Host, strings.Contains(string(sec.Sealed), value))
	}
	keyring, _, err := secrets.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := keyring.Open(sec.Sealed, secrets.SecretAD("shop", "STRIPE")); err != nil || string(got) != value {
		t.Errorf("Open(sealed, its AD) = %q, %v, want the value", got, err)
	}
	if _, err := keyring.Open(sec.Sealed, secrets.SecretAD("shop", "OTHER")); err == nil {
		t.Errorf("the sealed value opened under another name's AD")
	}

	if _, errs, code := run(t, dir, value+"\n", "secret", "set", "--host", "http://api.example.com", "shop", "PLAIN"); code != 0 || !strings.Contains(errs, "unencrypted") {
		t.Errorf("secret set http:// = %d %q, want 0 and a warning", code, errs)
	}
	out, _, code = run(t, dir, "", "secret", "list", "shop")
	if code != 0 || !strings.Contains(out, "STRIPE") || !strings.Contains(out, "https://api.stripe.com/v1") || !strings.Contains(out, "PLAIN") || strings.Contains(out, value) {
		t.Errorf("secret list = %d %q", code, out)
	}
	if _, _, code := run(t, dir, "n\n", "secret", "remove", "shop", "STRIPE"); code != 1 {
		t.Errorf("secret remove answered no = %d, want 1", code)
	}
	if _, _, code := run(t, dir, "", "secret", "remove", "shop", "STRIPE", "--yes"); code != 0 {
		t.Errorf("secret remove --yes = %d, want 0", code)
	}
	if _, errs, code := run(t, dir, "", "secret", "remove", "--yes", "shop", "STRIPE"); code != 1 || !strings.Contains(errs, "has no secret STRIPE") {
		t.Errorf("secret remove again = %d %q", code, errs)
	}
	out, _, _ = run(t, dir, "", "secret", "list", "shop")
	if strings.Contains(out, "STRIPE") {
		t.Errorf("secret list after remove = %q", out)
	}
}
