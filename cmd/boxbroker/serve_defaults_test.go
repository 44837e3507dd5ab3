package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/server"
)

// TestServe_FlagDefaultsAreDefaultConfig holds every serve flag that
// sets a Config field to server.DefaultConfig's value: the defaults are
// written once, there.
func TestServe_FlagDefaultsAreDefaultConfig(t *testing.T) {
	_, stderr, code := run(t, t.TempDir(), "", "serve", "-h")
	if code != 0 {
		t.Fatalf("serve -h exits %d: %s", code, stderr)
	}
	shown := map[string]string{} // flag → its "(default …)" text, "" for none
	re := regexp.MustCompile(`\(default (.*)\)\s*$`)
	for _, block := range strings.Split("\n"+stderr, "\n  -")[1:] {
		name, _, _ := strings.Cut(strings.Fields(block)[0], " ")
		shown[name] = ""
		if m := re.FindStringSubmatch(block); m != nil {
			shown[name] = m[1]
		}
	}
	def := server.DefaultConfig()
	tests := []struct {
		flag string
		want any
	}{
		{"listen", def.Listen},
		{"admin-listen", def.AdminListen},
		{"broker", def.Broker},
		{"anthropic-url", def.AnthropicURL.String()},
		{"feedback", def.Feedback},
		{"shutdown-grace", def.ShutdownGrace},
		{"upstream-timeout", def.UpstreamHeaderTimeout},
		{"read-timeout", def.ReadTimeout},
		{"decide-timeout", def.DecideTimeout},
		{"max-body", def.MaxBody},
		{"pool-retry-body", def.PoolRetryBody},
		{"egress-max-body", def.EgressMaxBody},
		{"audit-retention", def.AuditRetention},
		{"store-deadline", def.StoreDeadline},
		{"log-level", def.LogLevel},
		{"box-rate", def.BoxRate},
		{"box-burst", def.BoxBurst},
		{"box-concurrent", def.BoxConcurrent},
		{"reserve-max-tokens", def.ReserveMaxTokens},
		{"reservation-lease", def.ReservationLease},
		{"audit-required", !def.AuditOptional},
	}
	for _, tt := range tests {
		got, ok := shown[tt.flag]
		if !ok {
			t.Errorf("serve -h shows no --%s", tt.flag)
			continue
		}
		want := fmt.Sprint(tt.want)
		switch v := tt.want.(type) {
		case string:
			want = fmt.Sprintf("%q", v)
		case float64, int:
			if v == 0.0 || v == 0 {
				want = "" // flag shows no zero default
			}
		}
		if got != want {
			t.Errorf("serve --%s default = %s, want DefaultConfig's %s", tt.flag, got, want)
		}
	}
}
