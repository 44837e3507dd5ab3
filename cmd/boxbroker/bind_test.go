package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestBox_BindTTLAndGraceFromTheCLI: box add --from --ttl, box bind
// (--from, --from any, --clear) and box rotate --grace reach the same
// through the store and through the admin API (--admin-url).
func TestBox_BindTTLAndGraceFromTheCLI(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	for _, tt := range storeAndAdminAPI(t, b) {
		t.Run(tt.name, func(t *testing.T) {
			name := "bound-" + strings.ToLower(strings.ReplaceAll(tt.name, " ", "-"))
			code, out, errs := runEnv(t, tt.env, "", "box", "add", name, "--from", "10.20.0.0/16,192.0.2.7", "--ttl", "720h")
			if code != 0 || !strings.Contains(errs, "taken only from 10.20.0.0/16,192.0.2.7/32") || !strings.Contains(errs, "expires at") {
				t.Fatalf("box add --from --ttl = %d, stderr %q", code, errs)
			}
			first := strings.TrimSpace(out)
			b.Sync()
			box, err := b.Server.Store.Box(ctx, name)
			if err != nil || store.FormatFrom(box.From) != "10.20.0.0/16,192.0.2.7/32" || box.TokenTTL != 720*time.Hour ||
				time.Until(box.ExpiresAt) < 719*time.Hour || box.TokenHash != token.Hash(first) {
				t.Fatalf("box after add = %+v %v, want bound, with a 720h TTL", box, err)
			}
			if code, out, _ := runEnv(t, tt.env, "", "box", "list"); code != 0 || !strings.Contains(out, "FROM") || !strings.Contains(out, "10.20.0.0/16,192.0.2.7/32") {
				t.Errorf("box list = %d %q, want its FROM column", code, out)
			}
			tests := []struct {
				args []string
				want string
			}{
				{[]string{"--from", "203.0.113.0/24"}, "203.0.113.0/24"},
				{[]string{"--from", "any"}, ""},
				{[]string{"--from", "198.51.100.1"}, "198.51.100.1/32"},
				{[]string{"--clear"}, ""},
			}
			for _, bt := range tests {
				args := append([]string{"box", "bind", name}, bt.args...)
				if code, _, errs := runEnv(t, tt.env, "", args...); code != 0 {
					t.Fatalf("%q = %d, stderr %q", args, code, errs)
				}
				box, err := b.Server.Store.Box(ctx, name)
				if got := store.FormatFrom(box.From); err != nil || got != bt.want {
					t.Errorf("after %q: bound to %q %v, want %q", args, got, err, bt.want)
				}
			}
			for _, bad := range [][]string{{"box", "bind", name}, {"box", "bind", name, "--from", "10.0.0.0/33"}, {"box", "bind", name, "--from", "any", "--clear"}} {
				if code, _, _ := runEnv(t, tt.env, "", bad...); code == 0 {
					t.Errorf("%q = 0, want a usage error", bad)
				}
			}
			code, out, errs = runEnv(t, tt.env, "", "box", "rotate", name, "--grace", "1h")
			if code != 0 || !strings.Contains(errs, "old token goes on working until") {
				t.Fatalf("box rotate --grace = %d, stderr %q", code, errs)
			}
			box, err = b.Server.Store.Box(ctx, name)
			if err != nil || box.OldTokenHash != token.Hash(first) || box.TokenHash != token.Hash(strings.TrimSpace(out)) ||
				time.Until(box.OldUntil) < 59*time.Minute || box.TokenTTL != 720*time.Hour {
				t.Errorf("box after rotate --grace 1h = %+v %v, want the old token kept an hour, the TTL kept", box, err)
			}
		})
	}
}
