package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlags_MalformedValueSaysWhatItExpects: a flag given a value it does
// not take gets the message its BOXBROKER_* variable gets — the flag, the
// value and what it expects — and not the flag package's "parse error"
// followed by every flag's usage.
func TestFlags_MalformedValueSaysWhatItExpects(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--box-rate", "5/s"}, `--box-rate "5/s" is not a number such as 5 or 0.5`},
		{[]string{"serve", "--shutdown-grace", "30"}, `--shutdown-grace "30" is not a duration such as 30s, 10m or 720h`},
		{[]string{"serve", "--max-body", "64MB"}, `--max-body "64MB" is not a whole number such as 256`},
		{[]string{"serve", "--audit-required=maybe"}, `--audit-required "maybe" is not true or false`},
		{[]string{"audit", "--limit", "all"}, `--limit "all" is not a whole number such as 256`},
	}
	for _, tt := range tests {
		_, errs, code := run(t, t.TempDir(), "", tt.args...)
		if code != 2 || !strings.Contains(errs, tt.want) || strings.Contains(errs, "parse error") || strings.Contains(errs, "-admin-listen") {
			t.Errorf("%q = %d %q, want 2 and only %q", tt.args, code, errs, tt.want)
		}
	}
	// The variable's message, for comparison.
	_, errs, code := runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_BOX_RATE": "5/s"}, "", "serve")
	if code == 0 || !strings.Contains(errs, `BOXBROKER_BOX_RATE="5/s" is not a number such as 5 or 0.5`) {
		t.Errorf("serve with BOXBROKER_BOX_RATE=5/s = %d %q", code, errs)
	}
}

// TestHelp_ShowsTheArguments: every command's -h begins with a usage line
// naming its arguments (box add NAME), then its flags.
func TestHelp_ShowsTheArguments(t *testing.T) {
	for name, cmd := range commands() {
		if name == "version" {
			continue
		}
		words := []string{name}
		if len(cmd.subs) > 0 {
			words = nil
			for _, sub := range cmd.subs {
				words = append(words, name+" "+sub)
			}
		}
		if name == "proxy" {
			words = []string{"proxy ca", "proxy ca rotate"}
		}
		for _, w := range words {
			if _, ok := synopses[w]; !ok {
				t.Errorf("no synopsis for boxbroker %s", w)
				continue
			}
			_, errs, code := run(t, t.TempDir(), "", append(strings.Fields(w), "-h")...)
			if code != 0 || !strings.HasPrefix(errs, "usage: "+strings.SplitN(synopses[w], "\n", 2)[0]+"\n") || !strings.Contains(errs, "flags:\n  -") {
				t.Errorf("boxbroker %s -h = %d %q, want it to begin with its synopsis, then its flags", w, code, errs)
			}
		}
	}
	_, errs, _ := run(t, t.TempDir(), "", "box", "add", "--help")
	if !strings.HasPrefix(errs, "usage: boxbroker box add NAME [flags]\n") {
		t.Errorf("box add --help = %q, want it to begin with usage: boxbroker box add NAME", errs)
	}
}

// TestBudget_NegativeSaysSo: `budget set BOX -5` says a budget cannot be
// negative, not that -5 is an unknown flag.
func TestBudget_NegativeSaysSo(t *testing.T) {
	dir := t.TempDir()
	run(t, dir, "", "box", "add", "salad")
	for _, amount := range []string{"-5", "-0.5", "-$5"} {
		_, errs, code := run(t, dir, "", "budget", "set", "salad", amount)
		if code != 2 || !strings.Contains(errs, "a budget cannot be negative") || strings.Contains(errs, "not defined") {
			t.Errorf("budget set salad %s = %d %q, want 2 saying a budget cannot be negative", amount, code, errs)
		}
	}
	if _, errs, code := run(t, dir, "", "budget", "set", "salad", "5", "--principal", "github:ann", "-x"); code != 2 || !strings.Contains(errs, "not defined: -x") {
		t.Errorf("budget set with an unknown flag = %d %q, want it named", code, errs)
	}
}

// TestBudget_PrincipalWhoPaysNothingWarned: a budget for a principal on a
// box that principal pays nothing of (paid by the shared credential, no
// grant from them) is set, with a warning saying it limits nothing and
// how the principal comes to pay; none when the principal is the box's
// paying owner or has a current grant.
func TestBudget_PrincipalWhoPaysNothingWarned(t *testing.T) {
	dir := t.TempDir()
	run(t, dir, "", "box", "add", "salad")
	out, errs, code := run(t, dir, "", "budget", "set", "salad", "5", "--principal", "github:ann")
	if code != 0 || !strings.Contains(out, "set the budget of github:ann") || !strings.Contains(errs, "warning: no call of box salad is paid by github:ann") ||
		!strings.Contains(errs, "grant issue salad github:ann") {
		t.Errorf("budget set on a shared-paid box = %d %q %q, want it set with a warning", code, out, errs)
	}
	if _, errs, code := run(t, dir, "sk-ant-api03-OWNERKEY\n", "box", "payer", "salad", "owner", "--principal", "github:ann"); code != 0 {
		t.Fatalf("box payer owner = %d %q", code, errs)
	}
	if _, errs, code := run(t, dir, "", "budget", "set", "salad", "5", "--principal", "github:ann"); code != 0 || strings.Contains(errs, "warning") {
		t.Errorf("budget set for the paying owner = %d %q, want no warning", code, errs)
	}
	run(t, dir, "", "box", "payer", "salad", "shared")
	run(t, dir, "sk-ant-api03-VISITOR\n", "visitor", "set", "github:bea")
	if _, errs, code := run(t, dir, "", "grant", "issue", "salad", "github:bea"); code != 0 {
		t.Fatalf("grant issue = %d %q", code, errs)
	}
	if _, errs, code := run(t, dir, "", "budget", "set", "salad", "5", "--principal", "github:bea"); code != 0 || strings.Contains(errs, "warning") {
		t.Errorf("budget set for a granting visitor = %d %q, want no warning", code, errs)
	}
}

// TestServe_CannotListenLeavesNothing: a serve whose box-facing or admin
// address is taken says so and leaves no data directory behind.
func TestServe_CannotListenLeavesNothing(t *testing.T) {
	taken := takenAddr(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"box port", []string{"--listen", taken, "--admin-listen", "off"}, "(--listen, BOXBROKER_LISTEN)"},
		{"admin port", []string{"--listen", "127.0.0.1:0", "--admin-listen", taken}, "(--admin-listen, BOXBROKER_ADMIN_LISTEN"},
		{"proxy port", []string{"--listen", "127.0.0.1:0", "--admin-listen", "off", "--proxy-listen", taken}, "(--proxy-listen, BOXBROKER_PROXY_LISTEN)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			_, errs, code := run(t, dir, "", append([]string{"serve"}, tt.args...)...)
			if code != 1 || !strings.Contains(errs, tt.want) {
				t.Errorf("serve on a taken port = %d %q, want 1 naming %s", code, errs, tt.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("after a serve that could not listen, %s: %v, want no such directory", dir, err)
			}
		})
	}
}

// TestServe_WarnsWithoutAnthropicCredential: serve warns, once, when no
// Anthropic credential is set, and not when one is.
func TestServe_WarnsWithoutAnthropicCredential(t *testing.T) {
	dir := t.TempDir()
	run(t, dir, "", "box", "add", "salad")
	for _, set := range []bool{false, true} {
		if set {
			run(t, dir, "sk-ant-api03-WARNTEST\n", "credential", "set", "anthropic")
		}
		ctx, cancel := context.WithCancel(context.Background())
		srv := startServe(t, ctx, dir, nil, "--listen", "127.0.0.1:0", "--admin-listen", "off")
		cancel()
		srv.wait(t)
		warned := strings.Contains(srv.stderr.String(), "warning: no Anthropic credential is set")
		if warned == set {
			t.Errorf("serve with a credential set: %v; stderr %q; want a warning only without one", set, srv.stderr.String())
		}
		if !set && !strings.Contains(srv.stderr.String(), "boxbroker credential set anthropic") {
			t.Errorf("serve's warning = %q, want it to say how to set one", srv.stderr.String())
		}
	}
}
