package main

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestCLI_ViewerToken: `admin token --viewer` makes a viewer's token,
// which `admin tokens` marks; with it, the CLI through --admin-url reads,
// and each write prints the broker's refusal (403) naming the token's
// role and what to use instead, having changed nothing.
func TestCLI_ViewerToken(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	local := map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}

	code, out, errs := runEnv(t, local, "", "admin", "token", "--viewer", "--name", "wallboard")
	token := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(token, "bba_") || !strings.Contains(errs, "viewer's") || strings.Contains(errs, token) {
		t.Fatalf("admin token --viewer = %d %q %q, want the token alone on stdout and a viewer's said on stderr", code, out, errs)
	}
	code, out, errs = runEnv(t, local, "", "admin", "tokens")
	if code != 0 || !strings.Contains(out, "ROLE") {
		t.Fatalf("admin tokens = %d %q %q, want a ROLE column", code, out, errs)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(line)
		if want := map[bool]string{true: "viewer", false: "operator"}[strings.Contains(line, "wallboard")]; f[len(f)-1] != want {
			t.Errorf("admin tokens line %q, want its role %s", line, want)
		}
	}

	env := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": token, "BOXBROKER_DATA": t.TempDir()}
	for _, args := range [][]string{{"box", "list"}, {"audit"}, {"credential", "list"}, {"spend", "alpha"}} {
		if code, out, errs := runEnv(t, env, "", args...); code != 0 {
			t.Errorf("%s with a viewer's token = %d %q %q, want it read", strings.Join(args, " "), code, out, errs)
		}
	}
	writes := [][]string{
		{"box", "add", "beta"},
		{"box", "pause", "alpha"},
		{"box", "rotate", "alpha"},
		{"budget", "set", "alpha", "25"},
		{"proxy", "ca", "rotate", "--yes"},
	}
	for _, args := range writes {
		code, out, errs := runEnv(t, env, "", args...)
		if code == 0 || !strings.Contains(errs, "is a viewer's") || !strings.Contains(errs, "operator's admin token") || !strings.Contains(errs, "(403)") {
			t.Errorf("%s with a viewer's token = %d %q %q, want the broker's refusal naming the role (403)", strings.Join(args, " "), code, out, errs)
		}
	}
	if box, err := b.Server.Store.Box(t.Context(), "alpha"); err != nil || box.Paused {
		t.Errorf("alpha after a viewer's writes = %+v, %v, want it as it was", box, err)
	}
	if _, err := b.Server.Store.Box(t.Context(), "beta"); err == nil {
		t.Errorf("a viewer's box add made beta")
	}
}
