package main

import (
	"strings"
	"testing"
)

func TestCredentialPool_AddListRemove(t *testing.T) {
	dir := t.TempDir()
	const shared, second = "sk-ant-api03-POOLCLI-SHARED", "sk-ant-oat01-POOLCLI-SECOND"
	if out, errs, code := run(t, dir, shared+"\n", "credential", "set", "anthropic"); code != 0 || strings.Contains(out+errs, shared) {
		t.Fatalf("credential set = %d %q %q", code, out, errs)
	}
	out, errs, code := run(t, dir, second+"\n", "credential", "add", "anthropic", "team-b", "--weight", "3", "--url", "https://GW.example/")
	if code != 0 || strings.Contains(out+errs, second) || !strings.Contains(out, "setup token") || !strings.Contains(out, "weight 3") {
		t.Fatalf("credential add = %d %q %q", code, out, errs)
	}
	out, _, code = run(t, dir, "", "credential", "list")
	if code != 0 || strings.Contains(out, shared) || strings.Contains(out, second) {
		t.Fatalf("credential list = %d %q (a value shown?)", code, out)
	}
	for _, want := range []string{"default", "API key", "team-b", "setup token", "https://gw.example", "--admin-url"} {
		if !strings.Contains(out, want) {
			t.Errorf("credential list = %q, want it to hold %q", out, want)
		}
	}
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		say   string
	}{
		{"value in argv", "", []string{"credential", "add", "anthropic", "x", "sk-in-argv"}, 2, "never from arguments"},
		{"bad name", "v\n", []string{"credential", "add", "anthropic", "Bad"}, 2, "name is 1 to 64"},
		{"weight 0", "v\n", []string{"credential", "add", "anthropic", "x", "--weight", "0"}, 2, "weight"},
		{"url with a query", "v\n", []string{"credential", "add", "anthropic", "x", "--url", "https://h/?a=1"}, 2, "URL"},
		{"default is set, not added", "v\n", []string{"credential", "add", "anthropic", "default"}, 2, "credential set anthropic"},
		{"fountain is no pool", "v\n", []string{"credential", "add", "fountain", "x"}, 2, "takes anthropic"},
		{"no such entry", "", []string{"credential", "remove", "anthropic", "nope", "--yes"}, 1, "no entry named nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs, code := run(t, dir, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.say) {
				t.Errorf("%v = %d %q, want %d saying %q", tt.args, code, errs, tt.code, tt.say)
			}
		})
	}
	if out, errs, code := run(t, dir, "", "credential", "remove", "anthropic", "team-b", "--yes"); code != 0 || !strings.Contains(out, "removed anthropic pool entry team-b") {
		t.Fatalf("credential remove anthropic team-b = %d %q %q", code, out, errs)
	}
	out, _, _ = run(t, dir, "", "credential", "list")
	if strings.Contains(out, "team-b") || !strings.Contains(out, "default") {
		t.Errorf("credential list after remove = %q", out)
	}
}
