package main

import (
	"strings"
	"testing"
)

// TestCLI_KeyPastedIntoAHostURLIsNeverQuoted: an operator who pastes a
// key into `secret set --host` or `credential add anthropic NAME --url`
// (in the query, the fragment, after an opaque scheme, or the key alone
// where the URL goes) is told what is wrong without the CLI printing the
// key, to a terminal's scrollback or a CI job's log.
func TestCLI_KeyPastedIntoAHostURLIsNeverQuoted(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, dir, "", "box", "add", "alpha"); code != 0 {
		t.Fatalf("box add alpha = %d %s", code, errs)
	}
	const key = "sk_live_PASTED0123456789abcdef"
	for _, host := range []string{
		"https://api.stripe.com/v1?api_key=" + key,
		"https://api.stripe.com/v1?" + key,
		"https://api.stripe.com/v1#" + key,
		"https:" + key,
		key,
		"api.stripe.com/?key=" + key,
		"https://api.stripe.com:" + key + "/v1",
		"https://api.stripe.com/../?k=" + key,
	} {
		for _, args := range [][]string{
			{"secret", "set", "alpha", "STRIPE", "--host", host},
			{"credential", "add", "anthropic", "second", "--url", host},
		} {
			out, errs, code := run(t, dir, "value\n", args...)
			if code == 0 {
				t.Errorf("%s %q = 0, want it refused", strings.Join(args[:len(args)-2], " "), host)
			}
			if strings.Contains(out+errs, "PASTED") {
				t.Errorf("%s %q printed the key: %q %q", strings.Join(args[:len(args)-2], " "), host, out, errs)
			}
		}
	}
}
