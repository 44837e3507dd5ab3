package main

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/token"
)

// TestCLI_TokenPastedAsAnArgumentIsNeverPrinted: an operator who pastes a
// token where a name or ID goes (the first argument, a box's name, a
// grant's or an admin token's ID, a principal) is told what is wrong
// without the CLI printing the token, to a terminal's scrollback or a CI
// job's log: not in a usage error, a refusal or a confirmation prompt.
func TestCLI_TokenPastedAsAnArgumentIsNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := run(t, dir, "", "box", "add", "alpha")
	if code != 0 {
		t.Fatalf("box add alpha = %d %s", code, errs)
	}
	box := strings.Join(token.AppendFound(nil, out+errs, token.BoxPrefix), "")
	if len(box) != token.Len {
		t.Fatalf("box add alpha printed no token: %s %s", out, errs)
	}
	admin, err := token.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{box, admin, grant} {
		for _, args := range [][]string{
			{tok},
			{"box", "rotate", tok},
			{"box", "remove", tok, "--yes"},
			{"secret", "list", tok},
			{"grant", "revoke", tok},
			{"admin", "revoke", tok},
			{"admin", "revoke", tok, "--yes"},
			{"visitor", "set", tok},
			{"feedback", tok},
		} {
			out, errs, _ := run(t, dir, "\n", args...)
			if strings.Contains(out+errs, tok) {
				t.Errorf("boxbroker %s printed the token: %q %q", strings.Join(args[:len(args)-1], " "), out, errs)
			}
		}
	}
}
