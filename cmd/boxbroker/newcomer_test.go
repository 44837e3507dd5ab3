package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// runIn runs the CLI in-process with stdin and the given environment.
func runIn(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	code, stdout, stderr = runEnv(t, env, stdin, args...)
	return stdout, stderr, code
}

func TestServe_MalformedEnvValueRefused(t *testing.T) {
	tests := []struct {
		name, key, value, want string
	}{
		{"rate with a unit", "BOXBROKER_BOX_RATE", "5/s", `BOXBROKER_BOX_RATE="5/s" is not a number`},
		{"duration without a unit", "BOXBROKER_SHUTDOWN_GRACE", "30", `BOXBROKER_SHUTDOWN_GRACE="30" is not a duration`},
		{"size with a unit", "BOXBROKER_MAX_BODY", "64MB", `BOXBROKER_MAX_BODY="64MB" is not a whole number`},
		{"concurrency in words", "BOXBROKER_BOX_CONCURRENT", "many", `BOXBROKER_BOX_CONCURRENT="many" is not a whole number`},
		{"feedback neither keep nor off", "BOXBROKER_FEEDBACK", "maybe", `BOXBROKER_FEEDBACK="maybe" is not keep or off`},
		{"log level misspelt", "BOXBROKER_LOG_LEVEL", "warning", `BOXBROKER_LOG_LEVEL="warning" is not debug, info, warn or error`},
		{"admin address without a port", "BOXBROKER_ADMIN_LISTEN", "localhost", `BOXBROKER_ADMIN_LISTEN="localhost" is not a host:port`},
		{"admin host name with a port", "BOXBROKER_ADMIN_HOSTS", "broker.example.com,broker.example.com:8788", `admin-hosts (BOXBROKER_ADMIN_HOSTS) entry "broker.example.com:8788" is not a host name`},
		// Values that parse but that serve would not take as given.
		{"rate that is not a number", "BOXBROKER_BOX_RATE", "NaN", `BOXBROKER_BOX_RATE="NaN" is not a number of 0 or more`},
		{"rate without end", "BOXBROKER_BOX_RATE", "Inf", `BOXBROKER_BOX_RATE="Inf" is not a number of 0 or more`},
		{"negative grace", "BOXBROKER_SHUTDOWN_GRACE", "-1s", `BOXBROKER_SHUTDOWN_GRACE="-1s" is not a duration above 0`},
		{"retention of 0, which was 30 days", "BOXBROKER_AUDIT_RETENTION", "0s", `BOXBROKER_AUDIT_RETENTION="0s" is not a duration above 0`},
		{"body bound of 0, which was 64 MiB", "BOXBROKER_MAX_BODY", "0", `BOXBROKER_MAX_BODY="0" is not a whole number above 0`},
		{"concurrency below -1", "BOXBROKER_BOX_CONCURRENT", "-7", `BOXBROKER_BOX_CONCURRENT="-7" is not a whole number above 0, or -1 for no bound`},
		{"negative burst", "BOXBROKER_BOX_BURST", "-2", `BOXBROKER_BOX_BURST="-2" is not a whole number of 0 or more`},
		{"anthropic upstream without a scheme", "BOXBROKER_ANTHROPIC_URL", "api.anthropic.com", `anthropic-url (BOXBROKER_ANTHROPIC_URL) "api.anthropic.com" must be an http(s) URL`},
		{"broker word of two", "BOXBROKER_BROKER", "my lobby", `broker word (--broker, BOXBROKER_BROKER) "my lobby" must be one non-empty word`},
		{"store of another kind", "BOXBROKER_STORE", "mysql://db/boxbroker", `store (BOXBROKER_STORE) must be empty`},
		{"certificate without its key", "BOXBROKER_TLS_CERT", "/etc/boxbroker/tls.crt", `tls-cert and tls-key (BOXBROKER_TLS_CERT, BOXBROKER_TLS_KEY) go together`},
		{"price file that is not there", "BOXBROKER_PRICES", "/nonexistent/prices.json", `price file (--prices, BOXBROKER_PRICES): prices: open /nonexistent/prices.json`},
		{"passthrough entry with a space", "BOXBROKER_PROXY_PASSTHROUGH", "api.github.com,a b", `(BOXBROKER_PROXY_PASSTHROUGH) entries "a b" are not a host or host:port`},
		{"trusted proxy that is no CIDR", "BOXBROKER_TRUSTED_PROXY", "10.0.0.0/8,10.1.0.0/33", `--trusted-proxy (BOXBROKER_TRUSTED_PROXY): source "10.1.0.0/33" is neither a CIDR`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_LISTEN": "127.0.0.1:0", "BOXBROKER_ADMIN_LISTEN": "off", tt.key: tt.value}
			// A context that is already over: a serve that wrongly starts
			// stops at once rather than hanging the test.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var o, e bytes.Buffer
			c := &cli{stdin: strings.NewReader(""), stdout: &o, stderr: &e, getenv: func(k string) string { return env[k] }}
			code := c.main(ctx, []string{"serve"})
			out, errs := o.String(), e.String()
			if code == 0 || !strings.Contains(errs, tt.want) || strings.Contains(out, "listening") {
				t.Errorf("serve with %s=%q = %d, stdout %q, stderr %q; want a refusal saying %q", tt.key, tt.value, code, out, errs, tt.want)
			}
		})
	}
	// A malformed flag is refused too, naming the flag and the value.
	_, errs, code := runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir()}, "", "serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--box-rate", "5/s")
	if code != 2 || !strings.Contains(errs, `"5/s"`) || !strings.Contains(errs, "box-rate") {
		t.Errorf("serve --box-rate 5/s = %d %q, want a usage error naming the flag and value", code, errs)
	}
	// So is a flag's value that parses but is out of range.
	_, errs, code = runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir()}, "", "serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--box-rate", "Inf", "--decide-timeout", "-5s")
	if code != 1 || !strings.Contains(errs, "--box-rate +Inf is not a number of 0 or more") || !strings.Contains(errs, "--decide-timeout -5s is not a duration above 0") {
		t.Errorf("serve --box-rate Inf --decide-timeout -5s = %d %q, want a refusal naming both flags and values", code, errs)
	}
	// A certificate that cannot be loaded stops serve before it says it
	// is listening.
	var o, e bytes.Buffer
	tlsEnv := map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_TLS_CERT": filepath.Join(t.TempDir(), "missing.crt"), "BOXBROKER_TLS_KEY": filepath.Join(t.TempDir(), "missing.key")}
	c := &cli{stdin: strings.NewReader(""), stdout: &o, stderr: &e, getenv: func(k string) string { return tlsEnv[k] }}
	if code := c.main(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "off"}); code != 1 || o.Len() > 0 || !strings.Contains(e.String(), "BOXBROKER_TLS_CERT") || !strings.Contains(e.String(), "missing.crt") {
		t.Errorf("serve with a missing certificate = %d, stdout %q, stderr %q; want a refusal naming the file, before any listening line", code, o.String(), e.String())
	}
	// An address another process holds is named with its flag and
	// variable.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, errs, code = runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_LISTEN": held.Addr().String()}, "", "serve", "--admin-listen", "off")
	if code != 1 || !strings.Contains(errs, "listen on "+held.Addr().String()+" (--listen, BOXBROKER_LISTEN)") {
		t.Errorf("serve on a held address = %d %q, want a refusal naming the address, the flag and the variable", code, errs)
	}
	// A passthrough list with no proxy to use it is a warning.
	ctx, cancel := context.WithCancel(context.Background())
	s := startServe(t, ctx, t.TempDir(), map[string]string{"BOXBROKER_PROXY_PASSTHROUGH": "api.github.com"}, "--listen", "127.0.0.1:0", "--admin-listen", "off")
	cancel()
	if code := s.wait(t); code != 0 || !strings.Contains(s.stderr.String(), "warning: --proxy-passthrough (BOXBROKER_PROXY_PASSTHROUGH) is set but --proxy-listen") {
		t.Errorf("serve with a passthrough list and no proxy = %d, stderr %q; want it to start and warn", code, s.stderr.String())
	}
	// The values the usage documents are taken: -1 (no bound, never
	// retry) and a burst of 0 (the rate).
	ctx, cancel = context.WithCancel(context.Background())
	env := map[string]string{"BOXBROKER_BOX_CONCURRENT": "-1", "BOXBROKER_POOL_RETRY_BODY": "-1", "BOXBROKER_BOX_BURST": "0", "BOXBROKER_BOX_RATE": "0"}
	s = startServe(t, ctx, t.TempDir(), env, "--listen", "127.0.0.1:0", "--admin-listen", "off")
	cancel()
	if code := s.wait(t); code != 0 {
		t.Errorf("serve with %v = %d, stderr %q; want it to start and stop", env, code, s.stderr.String())
	}
}

func TestBoxList_MissingDataDirSaysSo(t *testing.T) {
	base := t.TempDir()
	tests := [][]string{
		{"box", "list"},
		{"box", "rotate", "salad"},
		{"box", "remove", "salad", "--yes"},
		{"box", "consent", "salad"},
		{"box", "resources", "salad"},
		{"box", "pause", "salad"},
		{"credential", "list"},
		{"credential", "remove", "anthropic", "--yes"},
		{"secret", "list", "salad"},
		{"secret", "set", "salad", "KEY", "--host", "https://api.example.com"},
		{"visitor", "list"},
		{"grant", "list", "salad"},
		{"budget", "list", "salad"},
		{"spend", "salad"},
		{"feedback", "list", "salad"},
		{"audit"},
		{"admin", "tokens"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			typo := filepath.Join(base, "typo")
			_, errs, code := runIn(t, nil, "some-secret-value\n", append(args, "--data", typo)...)
			if code != 1 || !strings.Contains(errs, "no boxbroker data at "+typo) || !strings.Contains(errs, "boxbroker box add") {
				t.Errorf("%v --data %s = %d %q; want it to say there is no boxbroker data there, and how to make it", args, typo, code, errs)
			}
			if _, err := os.Stat(typo); err == nil {
				t.Errorf("%v --data %s made the directory", args, typo)
			}
		})
	}
	// The commands that make data still make it.
	dir := filepath.Join(base, "new")
	if _, errs, code := runIn(t, nil, "", "box", "add", "salad", "--data", dir); code != 0 {
		t.Fatalf("box add on a new data directory = %d %q", code, errs)
	}
	if out, errs, code := runIn(t, nil, "", "box", "list", "--data", dir); code != 0 || !strings.Contains(out, "salad") {
		t.Errorf("box list after box add = %d %q %q", code, out, errs)
	}
}

// TestCLI_FlagsAfterArguments: every subcommand takes its flags before or
// after its positional arguments.
func TestCLI_FlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"BOXBROKER_DATA": dir}
	setup := [][]string{
		{"box", "add", "salad"}, {"box", "add", "gone"}, {"box", "add", "other"},
	}
	for _, args := range setup {
		if _, errs, code := runIn(t, env, "", args...); code != 0 {
			t.Fatalf("%v = %d %q", args, code, errs)
		}
	}
	runIn(t, env, "sk-ant-api03-FLAGSAFTER\n", "credential", "set", "anthropic")
	_, errs, _ := runIn(t, env, "", "admin", "token", "--name", "ops")
	id := strings.Fields(strings.TrimPrefix(errs, "admin token "))[0]
	tests := []struct {
		stdin string
		args  []string
	}{
		{"", []string{"box", "list", "--data", dir}},
		{"", []string{"box", "rotate", "salad", "--url", "http://broker.example"}},
		{"", []string{"box", "remove", "gone", "--yes"}},
		{"", []string{"box", "consent", "salad", "on", "--data", dir}},
		{"", []string{"box", "assign", "salad", "sandbox", "sb-1", "--data", dir}},
		{"", []string{"box", "resources", "salad", "--data", dir}},
		{"", []string{"box", "unassign", "salad", "sandbox", "sb-1", "--data", dir}},
		{"", []string{"box", "pause", "other", "--data", dir}},
		{"", []string{"box", "resume", "other", "--data", dir}},
		{"", []string{"box", "payer", "salad", "shared", "--data", dir}},
		{"", []string{"credential", "list", "--data", dir}},
		{"", []string{"credential", "remove", "anthropic", "--yes"}},
		{"longenoughvalue\n", []string{"secret", "set", "salad", "KEY", "--host", "https://api.example.com"}},
		{"", []string{"secret", "list", "salad", "--data", dir}},
		{"", []string{"secret", "remove", "salad", "KEY", "--yes"}},
		{"sk-ant-api03-VISITOR\n", []string{"visitor", "set", "github:vee", "--data", dir}},
		{"", []string{"visitor", "remove", "github:vee", "--yes"}},
		{"", []string{"grant", "issue", "salad", "github:vee", "--ttl", "10m"}},
		{"", []string{"grant", "list", "salad", "--data", dir}},
		{"", []string{"budget", "set", "salad", "5", "--principal", "github:ann"}},
		{"", []string{"budget", "list", "salad", "--month", "2026-01"}},
		{"", []string{"budget", "remove", "salad", "--principal", "github:ann", "--yes"}},
		{"", []string{"spend", "salad", "--month", "2026-01"}},
		{"", []string{"feedback", "list", "salad", "--after", "0"}},
		{"", []string{"feedback", "export", "salad", "--after", "0"}},
		{"", []string{"audit", "salad", "--since", "1h"}},
		{"", []string{"admin", "tokens", "--data", dir}},
		{"", []string{"admin", "revoke", id, "--yes"}},
		// Flags before a command's word, too.
		{"", []string{"box", "--data", dir, "list"}},
		{"", []string{"secret", "--data", dir, "list", "salad"}},
		{"", []string{"budget", "--month", "2026-01", "list", "salad"}},
		{"", []string{"proxy", "--data", dir, "ca"}},
		{"", []string{"--data", dir, "box", "list"}},
		{"", []string{"--data", dir, "spend", "salad"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if out, errs, code := runIn(t, env, tt.stdin, tt.args...); code != 0 {
				t.Errorf("%v = %d, stdout %q, stderr %q; want 0", tt.args, code, out, errs)
			}
		})
	}
}

// TestCLI_HintURLMustBeAURL: the --url the hints are printed from
// (BOXBROKER_URL) must be an http(s) URL with a host, and a refused one
// changes nothing: box rotate keeps the old token.
func TestCLI_HintURLMustBeAURL(t *testing.T) {
	dir := t.TempDir()
	tok, errs, code := run(t, dir, "", "box", "add", "salad")
	if code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	tests := []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"BOXBROKER_URL": "localhost:8787"}, []string{"box", "rotate", "salad"}},
		{nil, []string{"box", "add", "other", "--url", "ftp://broker.example"}},
		{nil, []string{"secret", "set", "salad", "KEY", "--host", "https://api.example.com", "--url", "http://"}},
	}
	for _, tt := range tests {
		env := map[string]string{"BOXBROKER_DATA": dir}
		for k, v := range tt.env {
			env[k] = v
		}
		if out, errs, code := runIn(t, env, "longenoughvalue\n", tt.args...); code != 2 || out != "" || !strings.Contains(errs, "--url (BOXBROKER_URL)") || !strings.Contains(errs, "is not an http(s) URL") {
			t.Errorf("%v with %v = %d %q %q, want a refusal naming --url and BOXBROKER_URL", tt.args, tt.env, code, out, errs)
		}
	}
	out, _, _ := run(t, dir, "", "box", "list")
	if strings.Contains(out, "other") {
		t.Errorf("box add with a bad --url added the box: %q", out)
	}
	if out, _, _ := run(t, dir, "", "secret", "list", "salad"); strings.Contains(out, "KEY") {
		t.Errorf("secret set with a bad --url set the secret: %q", out)
	}
	cfg := server.Config{DataDir: dir}
	cfg.Defaults()
	st, err := server.OpenStore(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.BoxByTokenHash(context.Background(), token.Hash(strings.TrimSpace(tok))); err != nil {
		t.Errorf("box rotate with a bad --url: the old token no longer finds the box (%v)", err)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errs, code := runIn(t, nil, "", args...)
		if code != 0 || !strings.HasPrefix(out, "boxbroker ") || errs != "" {
			t.Errorf("%v = %d %q %q", args, code, out, errs)
		}
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/intentius/boxbroker", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionLine(bi, true)
	want := "boxbroker github.com/intentius/boxbroker v1.2.3, revision abc123 (2026-12-01T00:00:00Z), with uncommitted changes, go1.26.8"
	if got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
}

func TestCLI_UnknownCommandSuggests(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bx"}, `did you mean "box"?`},
		{[]string{"credentials"}, `did you mean "credential"?`},
		{[]string{"sever"}, `did you mean "serve"?`},
		{[]string{"box", "lst"}, `did you mean "list"?`},
		{[]string{"box", "pase", "x"}, `did you mean "pause"?`},
	}
	for _, tt := range tests {
		_, errs, code := runIn(t, nil, "", tt.args...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v = %d %q, want a suggestion %q", tt.args, code, errs, tt.want)
		}
		if strings.Contains(errs, "manage boxes") {
			t.Errorf("%v printed the whole usage: %q", tt.args, errs)
		}
	}
}

func TestCLI_UsageTexts(t *testing.T) {
	dir := t.TempDir()
	// The subcommands the README's Commands table gives each command are
	// in `boxbroker help` and in the command's own bare usage.
	_, help, _ := run(t, dir, "", "help")
	readme := map[string][]string{
		"box":        {"add", "list", "rotate", "remove", "consent", "assign", "unassign", "resources", "payer", "pause", "resume"},
		"credential": {"set", "add", "list", "remove"},
		"secret":     {"set", "list", "remove"},
		"visitor":    {"set", "list", "remove"},
		"grant":      {"issue", "list", "revoke"},
		"budget":     {"set", "list", "remove"},
		"feedback":   {"list", "export"},
		"admin":      {"token", "tokens", "revoke"},
	}
	for cmd, subs := range readme {
		var line string
		for _, l := range strings.Split(help, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == cmd {
				line = l
			}
		}
		_, bare, _ := run(t, dir, "", cmd)
		for _, sub := range subs {
			if !regexp.MustCompile(`\b` + sub + `\b`).MatchString(strings.TrimPrefix(strings.TrimSpace(line), cmd)) {
				t.Errorf("boxbroker help's %s line = %q, want %s in it", cmd, line, sub)
			}
			if !strings.Contains(bare, sub) {
				t.Errorf("boxbroker %s = %q, want %s in it", cmd, bare, sub)
			}
		}
	}
	if _, errs, _ := run(t, dir, "", "box"); !strings.Contains(errs, "pause") || !strings.Contains(errs, "resume") {
		t.Errorf("bare box usage = %q, want pause and resume in it", errs)
	}
	// `boxbroker <command> -h`, as the usage says, gives a command of
	// several its words.
	for cmd, subs := range readme {
		_, errs, code := run(t, dir, "", cmd, "-h")
		if code != 0 || strings.Contains(errs, "unknown") {
			t.Errorf("boxbroker %s -h = %d %q, want its usage", cmd, code, errs)
		}
		for _, sub := range subs {
			if !strings.Contains(errs, sub) {
				t.Errorf("boxbroker %s -h = %q, want %s in it", cmd, errs, sub)
			}
		}
	}
	if _, errs, _ := run(t, dir, "", "box", "list", "-h"); strings.Contains(errs, "  -yes") || strings.Contains(errs, "  -url") {
		t.Errorf("box list -h = %q, lists flags box list has no use for", errs)
	}
	_, errs, _ := run(t, dir, "", "report", "--help")
	if strings.Contains(errs, "-runs chant") || strings.Contains(errs, "-status chant") || !strings.Contains(errs, "-runs FILE") {
		t.Errorf("report --help = %q, want -runs FILE", errs)
	}
	if _, errs, code := run(t, dir, "", "report", "--data", dir, "--dry-run"); code != 2 || !strings.Contains(errs, "opens no store") {
		t.Errorf("report --data = %d %q, want a refusal saying why", code, errs)
	}
	run(t, dir, "", "box", "add", "salad")
	run(t, dir, "", "budget", "set", "salad", "5")
	if _, errs, code := run(t, dir, "", "budget", "remove", "salad"); code != 1 || !strings.Contains(errs, "[y/N] \nboxbroker budget: not removed") {
		t.Errorf("budget remove without a terminal = %d %q, want the question and the answer on lines of their own", code, errs)
	}
}

func TestReport_SaysWhichMonth(t *testing.T) {
	sample := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Sample json.RawMessage }
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(f, d.Sample, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	status, runs := sample("workspace-status.sample.json"), sample("workspace-runs.sample.json")
	_, errs, code := run(t, "", "", "report", "--dry-run", "--status", status, "--runs", runs, "--box", "salad", "--month", "2027-01")
	if code != 0 || !strings.Contains(errs, "spend for 2027-01") || !strings.Contains(errs, "runs only in 2026-09, 2026-10") {
		t.Errorf("report of a month with no runs = %d %q, want it to name the month and the months that have runs", code, errs)
	}
	out, errs, code := run(t, "", "", "report", "--dry-run", "--status", status, "--runs", runs, "--box", "salad", "--month", "2026-10")
	if code != 0 || !strings.Contains(errs, "spend for 2026-10") || !strings.Contains(out, `"month": "2026-10"`) {
		t.Errorf("report --month 2026-10 = %d %q %q", code, out, errs)
	}
	// chant's sample file as it is: the status document is under "sample".
	wrapped := filepath.Join("..", "..", "testdata", "workspace-status.sample.json")
	_, errs, code = run(t, "", "", "report", "--dry-run", "--status", wrapped)
	if code != 1 || !strings.Contains(errs, `a top-level "members" list`) || !strings.Contains(errs, `under "sample"`) {
		t.Errorf("report of a document without a box block = %d %q, want what it expected to find", code, errs)
	}
	empty := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(empty, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run(t, "", "", "report", "--dry-run", "--status", empty); code != 1 || !strings.Contains(errs, "top level is empty") {
		t.Errorf("report of {} = %d %q, want it to say the document's top level is empty", code, errs)
	}
}

func TestCredentialSet_WarnsOfUnlikelyValue(t *testing.T) {
	dir := t.TempDir()
	const value = "hunter2-not-a-key"
	out, errs, code := run(t, dir, value+"\n", "credential", "set", "anthropic")
	if code != 0 || !strings.Contains(errs, "warning") || !strings.Contains(errs, "sk-ant-") || strings.Contains(out+errs, value) {
		t.Errorf("credential set anthropic with %q = %d %q %q; want a warning that does not echo it", value, code, out, errs)
	}
	for _, v := range []string{"sk-ant-api03-GOODKEY", "sk-ant-oat01-GOODTOKEN"} {
		if _, errs, code := run(t, dir, v+"\n", "credential", "set", "anthropic"); code != 0 || strings.Contains(errs, "warning") {
			t.Errorf("credential set anthropic with a well-formed value = %d %q, want no warning", code, errs)
		}
	}
}

func TestCLI_PrincipalNeedsKindLogin(t *testing.T) {
	dir := t.TempDir()
	run(t, dir, "", "box", "add", "salad")
	for _, args := range [][]string{
		{"budget", "set", "salad", "5", "--principal", "octo"},
		{"box", "payer", "salad", "owner", "--principal", "octo"},
		{"grant", "issue", "salad", "octo"},
		{"visitor", "set", "octo"},
		{"budget", "set", "salad", "5", "--principal", "github:\x1b[2Joct"},
	} {
		_, errs, code := run(t, dir, "sk-ant-api03-X\n", args...)
		if code != 2 || !strings.Contains(errs, "kind:login") || strings.Contains(errs, "\x1b") {
			t.Errorf("%q = %d %q, want a refusal naming the kind:login form", args, code, errs)
		}
	}
}

// seed opens the SQLite store in dir, made by `box add salad`.
func seed(t *testing.T, dir string) store.Store {
	t.Helper()
	if _, errs, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	cfg := server.Config{DataDir: dir}
	cfg.Defaults()
	st, err := server.OpenStore(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// hostile is what a box might put in a scope word, a route or a principal
// to drive the operator's terminal: retitle it, ring the bell, clear it.
const hostile = "\x1b]0;pwned\x07\x1b[2J\u009b31m"

func noControls(t *testing.T, what, s string) {
	t.Helper()
	for _, b := range []string{"\x1b", "\x07", "\u009b"} {
		if strings.Contains(s, b) {
			t.Errorf("%s printed a raw %q: %q", what, b, s)
		}
	}
}

func TestAudit_EscapesControlCharacters(t *testing.T) {
	dir := t.TempDir()
	st := seed(t, dir)
	err := st.AddAudit(context.Background(), []store.AuditEntry{{Box: "salad", At: time.Now().UTC(), Method: "POST", Route: "/egress/" + hostile,
		Capability: "egress", Words: []string{hostile}, Status: 403, Reason: "undeclared", Message: "add " + hostile}})
	if err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, dir, "", "audit", "--since", "1h")
	if code != 0 || !strings.Contains(out, `\x1b]0;pwned\x07`) {
		t.Fatalf("audit = %d %q %q, want the entry with its control characters escaped", code, out, errs)
	}
	noControls(t, "audit", out)
}

func TestSpend_EscapesControlCharacters(t *testing.T) {
	dir := t.TempDir()
	st := seed(t, dir)
	month := time.Now().UTC().Format("2006-01")
	p, _ := json.Marshal(hostile)
	doc := `{"capabilities":[],"spend":{"month":"` + month + `","usd":1,"runs":1,"unpriced":0,"byPrincipal":[{"principal":` + string(p) + `,"usd":1,"runs":1,"unpriced":0}]}}`
	box, err := st.Box(context.Background(), "salad")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveDeclaration(context.Background(), "salad", box.TokenHash, []byte(doc), time.Now()); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, dir, "", "spend", "salad")
	if code != 0 || !strings.Contains(out, `\x1b]0;pwned`) {
		t.Fatalf("spend = %d %q %q, want the reported principal, escaped", code, out, errs)
	}
	noControls(t, "spend", out)
}

func TestSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"github:ann", "github:ann"},
		{"héllo wörld", "héllo wörld"},
		{"a\x1bb", `a\x1bb`},
		{"bell\x07", `bell\x07`},
		{"del\x7f", `del\x7f`},
		{"csi\u009b", `csi\u009b`},
		{"bad\xffbyte", `bad\xffbyte`},
	}
	for _, tt := range tests {
		if got := safe(tt.in); got != tt.want {
			t.Errorf("safe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var b bytes.Buffer
	json.NewEncoder(jsonSafe{&b}).Encode("x\u009by\x7f")
	if got := b.String(); got != `"x\u009by\u007f"`+"\n" {
		t.Errorf("jsonSafe wrote %q", got)
	}
}

// TestCLI_ActionSaysItOnce: an action on a data directory says what it
// did once, on stdout (the audit row keeps it too), without the
// operator service's INFO log line on stderr beside it.
func TestCLI_ActionSaysItOnce(t *testing.T) {
	// The binary's default logger writes to its stderr; here, to logged.
	var logged bytes.Buffer
	was := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(was) })
	dir := t.TempDir()
	for _, args := range [][]string{{"box", "add", "salad"}, {"box", "pause", "salad"}, {"admin", "token"}} {
		logged.Reset()
		_, errs, code := run(t, dir, "", args...)
		if code != 0 || strings.Contains(errs+logged.String(), "operator: ") {
			t.Errorf("%v = %d, stderr %q, log %q: want no log line", args, code, errs, logged.String())
		}
	}
}

// TestCLI_HelpOfAMistypedWordSaysItIsUnknown: `-h` after a mistyped word
// of a command of several is refused as the word is without it, naming
// the words there are, never answered with the usage of a command
// boxbroker does not have.
func TestCLI_HelpOfAMistypedWordSaysItIsUnknown(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string // in the refusal
	}{
		{[]string{"admin", "tokenz", "-h"}, "tokens"},
		{[]string{"spool", "dead", "lisst", "-h"}, "spool dead list"},
		{[]string{"visitor", "sett", "-h"}, "set"},
		{[]string{"grant", "isue", "-h"}, "issue"},
		{[]string{"budget", "sett", "-h"}, "set"},
		{[]string{"secret", "lst", "-h"}, "list"},
	}
	for _, tt := range tests {
		_, errs, code := run(t, dir, "", tt.args...)
		if code != 2 || strings.Contains(errs, "usage: boxbroker "+strings.Join(tt.args[:len(tt.args)-1], " ")) || !strings.Contains(errs, tt.want) {
			t.Errorf("%v = %d %q, want it refused as an unknown word, naming %q", tt.args, code, errs, tt.want)
		}
	}
}
