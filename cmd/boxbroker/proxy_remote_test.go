package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// TestCLI_ProxyCAThroughAdminURL: `proxy ca` and `proxy ca rotate` with
// --admin-url print what they print on the data directory: the same
// certificates, the question asked first, the rotation's new CA alone on
// stdout and its moment on stderr, never a key.
func TestCLI_ProxyCAThroughAdminURL(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	local := map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}
	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	code, first, errs := runEnv(t, remote, "", "proxy", "ca")
	if code != 0 || len(certs(t, first)) != 1 {
		t.Fatalf("proxy ca --admin-url = %d %q %q, want one certificate", code, first, errs)
	}
	if code, onDisk, _ := runEnv(t, local, "", "proxy", "ca"); code != 0 || onDisk != first {
		t.Errorf("proxy ca on the data directory = %d %q, want what --admin-url printed", code, onDisk)
	}
	if code, out, errs := runEnv(t, remote, "n\n", "proxy", "ca", "rotate"); code == 0 || out != "" || !strings.Contains(errs, "Rotate the egress proxy's CA? The proxy signs with a new CA in 168h0m0s;") || !strings.Contains(errs, "not rotated") {
		t.Errorf("proxy ca rotate --admin-url answered no = %d %q %q, want the question and not rotated", code, out, errs)
	}
	if code, _, errs := runEnv(t, remote, "", "proxy", "ca", "rotate", "--grace", "-1h", "--yes"); code != 2 {
		t.Errorf("proxy ca rotate --admin-url --grace -1h = %d %q, want a usage error", code, errs)
	}
	code, next, errs := runEnv(t, remote, "", "proxy", "ca", "rotate", "--grace", "48h", "--yes")
	if code != 0 || len(certs(t, next)) != 1 || next == first || strings.Contains(next+errs, "PRIVATE KEY") ||
		!strings.HasPrefix(errs, "The egress proxy signs with this CA from ") || !strings.Contains(errs, "Z (a running serve reads it within a minute)") {
		t.Fatalf("proxy ca rotate --admin-url = %d %q %q, want the new CA and when it signs", code, next, errs)
	}
	for name, env := range map[string]map[string]string{"--admin-url": remote, "the data directory": local} {
		if code, during, _ := runEnv(t, env, "", "proxy", "ca"); code != 0 || during != first+next {
			t.Errorf("proxy ca on %s during the grace = %d %q, want the current and the new", name, code, during)
		}
	}
}

// TestCLI_PricesThroughAdminURL: `prices --admin-url` prints the running
// broker's table, exactly as `prices` with the same price file and
// --unpriced-as prints it here; --prices and --unpriced-as are not taken
// with it.
func TestCLI_PricesThroughAdminURL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"$checked":"2026-11-30","$source":"our contract","claude-house-1":{"input":2,"output":9},"claude-3-haiku-20240307":null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.Prices, c.UnpricedAs = file, "claude-house-1" }})
	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken}
	for _, extra := range [][]string{nil, {"--json"}} {
		code, want, errs := runEnv(t, nil, "", append([]string{"prices", "--prices", file, "--unpriced-as", "claude-house-1"}, extra...)...)
		if code != 0 {
			t.Fatalf("prices --prices = %d %q", code, errs)
		}
		if code, got, errs := runEnv(t, remote, "", append([]string{"prices"}, extra...)...); code != 0 || got != want {
			t.Errorf("prices --admin-url %q = %d %q\n%s\nwant what prices with the broker's file prints:\n%s", extra, code, errs, got, want)
		}
	}
	if code, _, errs := runEnv(t, remote, "", "prices", "--prices", file); code != 2 {
		t.Errorf("prices --admin-url --prices FILE = %d %q, want a usage error", code, errs)
	}
}
