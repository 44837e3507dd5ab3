package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestServe_WebhookURLOnTheCommandLineIsWarnedOf: a webhook's URL is
// often its credential (a Slack or Teams incoming webhook's path), and a
// flag's value is in serve's argv, which every user of the machine reads
// (ps, /proc/PID/cmdline): given on the command line with a path or a
// query, serve warns, naming the flag and its variable and never the
// URL; from the variable, or with none, it says nothing. The audit
// sink's URL is warned of with a query (a log service's key,
// ?dd-api-key=…) or a user, not for a path alone.
func TestServe_WebhookURLOnTheCommandLineIsWarnedOf(t *testing.T) {
	const hook = "https://hooks.slack.com/services/T0/B0/XslackArgv1"
	taken := takenAddr(t)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		warn string
	}{
		{"proposal webhook in argv", nil, []string{"--proposal-webhook", hook}, "BOXBROKER_PROPOSAL_WEBHOOK"},
		{"budget webhook in argv", map[string]string{"BOXBROKER_BUDGET_ALERTS": "80"}, []string{"--budget-webhook", hook}, "BOXBROKER_BUDGET_WEBHOOK"},
		{"from the environment", map[string]string{"BOXBROKER_PROPOSAL_WEBHOOK": hook}, nil, ""},
		{"a host alone", nil, []string{"--proposal-webhook", "https://hooks.example.com"}, ""},
		{"audit sink with a key in its query in argv", nil, []string{"--audit-sink-url", "https://logs.example.com/in?dd-api-key=XslackArgv1"}, "BOXBROKER_AUDIT_SINK_URL"},
		{"audit sink from the environment", map[string]string{"BOXBROKER_AUDIT_SINK_URL": "https://logs.example.com/in?dd-api-key=XslackArgv1"}, nil, ""},
		{"audit sink with a path alone", nil, []string{"--audit-sink-url", "https://logs.example.com/v1/input"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_PROPOSAL_WEBHOOK_KEY": "k", "BOXBROKER_BUDGET_WEBHOOK_KEY": "k"}
			for k, v := range tt.env {
				env[k] = v
			}
			var out, errb bytes.Buffer
			c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
			// The box-facing address is taken: serve stops there, after
			// reading its configuration.
			args := append([]string{"serve", "--listen", taken, "--admin-listen", "off"}, tt.args...)
			if code := c.main(context.Background(), args); code == 0 {
				t.Fatalf("serve on a taken address = 0, want it to fail")
			}
			got := out.String() + errb.String()
			if strings.Contains(got, "XslackArgv1") {
				t.Errorf("serve quotes the webhook's URL:\n%s", got)
			}
			if warned := strings.Contains(got, "warning:") && strings.Contains(got, "which every user of this machine reads"); warned != (tt.warn != "") || !strings.Contains(got, tt.warn) {
				t.Errorf("serve %q wrote\n%s\nwant a warning naming %q: %v", tt.args, got, tt.warn, tt.warn != "")
			}
		})
	}
}

// takenAddr is a loopback address a listener holds until the test ends,
// for a serve that must fail to listen.
func takenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}
