package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestServe_WarnsOfPassthroughToASecretsHost: serve names, as it starts,
// each passthrough entry that a secret is pinned to, with the box and
// secret, since the proxy refuses those boxes a tunnel there.
func TestServe_WarnsOfPassthroughToASecretsHost(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, dir, "", "box", "add", "shop"); code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	if _, errs, code := run(t, dir, "longenoughvalue0123\n", "secret", "set", "shop", "PASS", "--host", "https://pass.example:8443"); code != 0 {
		t.Fatalf("secret set = %d %q", code, errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServe(t, ctx, dir, map[string]string{"BOXBROKER_PROXY_PASSTHROUGH": "pass.example,free.example"},
		"--listen", "127.0.0.1:0", "--admin-listen", "off", "--proxy-listen", "127.0.0.1:0")
	const want = "warning: egress proxy passthrough pass.example:443 (shop/PASS)"
	tick := time.NewTicker(5 * time.Millisecond) // polls a condition; orders nothing
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.stderr.String(), want) && time.Now().Before(deadline); <-tick.C {
	}
	cancel()
	if code := s.wait(t); code != 0 {
		t.Fatalf("serve = %d", code)
	}
	errs := s.stderr.String()
	if !strings.Contains(errs, want) || strings.Contains(errs, "free.example:443 (") {
		t.Errorf("serve's stderr %q, want a warning for pass.example only", errs)
	}
}
