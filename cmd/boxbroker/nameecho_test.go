package main

import (
	"strings"
	"testing"
)

// TestCLI_ValueWhereANameGoesIsNeverShown: a key or token given where a
// name or a word goes (a secret's value typed in its name's place, an
// Anthropic key for a box's name, a visitor's key for its principal, a
// token as a command) is refused as a usage error that says what the
// argument is to be and never repeats it, into a terminal's scrollback,
// a shell history's neighbour or a CI job's log; a name that reads as
// one is still quoted, as the mistake to correct.
func TestCLI_ValueWhereANameGoesIsNeverShown(t *testing.T) {
	const (
		anthropic = "sk-ant-api03-Xname1" + "AbCdEfGh0123456789-_AbCdEfGh0123456789AbCdEfGh0123456789AbCdEfGh0123456789AbCdEfGhIjKl"
		github    = "ghp_Xname1bC9dE8fG7hI6jK5lM4nO3pQ2rS1tU0v"
		random    = "Xname1q7RzK2mW9vB4nT8cY3hL6jP1sD5fG0aE"
	)
	tests := []struct {
		args []string
		want string // what the refusal says the argument is to be
	}{
		{[]string{"secret", "set", "alpha", anthropic, "--host", "https://api.example"}, "secret name"},
		{[]string{"secret", "set", "alpha", random, "--host", "https://api.example"}, "secret name"},
		{[]string{"secret", "set", anthropic, "STRIPE_KEY", "--host", "https://api.example"}, "box name"},
		{[]string{"box", "add", github}, "box name"},
		{[]string{"box", "pause", anthropic}, "box name"},
		{[]string{"box", "consent", "alpha", github}, "on or off"},
		{[]string{"box", "assign", "alpha", anthropic, "conv-1"}, "kind"},
		{[]string{"visitor", "set", anthropic}, "not a principal"},
		{[]string{"visitor", "remove", "github:ann " + anthropic}, "not a principal"},
		{[]string{"secret", anthropic}, "unknown secret command"},
		{[]string{"budget", github}, "unknown budget command"},
		{[]string{anthropic}, "unknown command"},
		{[]string{"prices", anthropic}, "takes no arguments"},
		{[]string{"ask", "alpha", anthropic}, "hosts, budget, or secret:NAME"},
		{[]string{"serve", random}, "takes no arguments"},
	}
	for _, tt := range tests {
		out, errs, code := runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir()}, "", tt.args...)
		if code != 2 || strings.Contains(out+errs, "Xname1") || !strings.Contains(errs, tt.want) || !strings.Contains(errs, "not shown") {
			t.Errorf("boxbroker %.40q… = %d, stdout %q, stderr %q; want a usage error saying %q, never the value", tt.args, code, out, errs, tt.want)
		}
	}
	for _, tt := range []struct {
		args []string
		name string
	}{
		{[]string{"secret", "set", "alpha", "github_token", "--host", "https://api.example"}, `"github_token"`},
		{[]string{"box", "add", "Alpha"}, `"Alpha"`},
		{[]string{"box", "lsit"}, `"lsit"`},
	} {
		_, errs, code := runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir()}, "", tt.args...)
		if code != 2 || !strings.Contains(errs, tt.name) {
			t.Errorf("boxbroker %q = %d, stderr %q; want a usage error quoting %s", tt.args, code, errs, tt.name)
		}
	}
}

// TestServe_KeyInTheWrongVariableIsNeverShown: a key or token put in a
// variable or flag that takes a number, a duration or a word
// (BOXBROKER_AUDIT_SINK_BACKLOG for BOXBROKER_AUDIT_SINK_TOKEN, one line
// of an environment file off by one) is refused naming the variable or
// flag and what it is to be, never the value; a value that reads as a
// mistyped number is still quoted.
func TestServe_KeyInTheWrongVariableIsNeverShown(t *testing.T) {
	const token = "Xvar1q7RzK2mW9vB4nT8cY3hL6jP1sD5fG0aE"
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"BOXBROKER_AUDIT_SINK_BACKLOG": token}, nil, "BOXBROKER_AUDIT_SINK_BACKLOG="},
		{map[string]string{"BOXBROKER_BOX_RATE": "sk-ant-api03-Xvar1AbCdEf"}, nil, "BOXBROKER_BOX_RATE="},
		{nil, []string{"--shutdown-grace", token}, "--shutdown-grace"},
	} {
		env := map[string]string{"BOXBROKER_DATA": t.TempDir()}
		for k, v := range tt.env {
			env[k] = v
		}
		out, errs, code := runIn(t, env, "", append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "off"}, tt.args...)...)
		if code == 0 || strings.Contains(out+errs, "Xvar1") || !strings.Contains(errs, tt.want) || !strings.Contains(errs, "not shown") {
			t.Errorf("serve with a key in %s = %d, stdout %q, stderr %q; want a refusal naming it, never the value", tt.want, code, out, errs)
		}
	}
	_, errs, _ := runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_BOX_RATE": "5/s"}, "", "serve", "--listen", "127.0.0.1:0", "--admin-listen", "off")
	if !strings.Contains(errs, `BOXBROKER_BOX_RATE="5/s"`) {
		t.Errorf("serve with BOXBROKER_BOX_RATE=5/s: stderr %q, want the value quoted", errs)
	}
}
