package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestCLI_PayThroughTheAdminAPI runs box payer, visitor, grant, budget,
// spend and box pause|resume with --admin-url against a running broker:
// each change is in force at the box's next call, no credential or grant
// value is printed but the grant issued, and budget list and spend print
// what they print from the store.
func TestCLI_PayThroughTheAdminAPI(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	boxToken := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, "sk-ant-api03-SHARED-REMOTE")
	const ownerKey = "sk-ant-api03-OWNER-REMOTE"
	const visitorKey = "sk-ant-oat01-VISITOR-REMOTE"
	month := spend.Month(time.Now())
	report := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}],` +
		`"spend":{"month":"` + month + `","usd":2.5,"runs":2,"unpriced":0,"byPrincipal":[{"principal":"github:ann","usd":2.5,"runs":2,"unpriced":0}]}}`
	if resp := b.Do("POST", protocol.RouteDeclaration, boxToken, []byte(report), nil); resp.StatusCode != 200 {
		t.Fatalf("report = %d %s", resp.StatusCode, resp.Body)
	}
	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	local := map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}
	cli := func(stdin string, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runEnv(t, remote, stdin, args...)
		if code != 0 {
			t.Fatalf("boxbroker %s = %d %q %q, want 0", strings.Join(args, " "), code, out, errs)
		}
		for _, secret := range []string{ownerKey, visitorKey, b.AdminToken} {
			if strings.Contains(out+errs, secret) {
				t.Errorf("boxbroker %s printed a credential or the admin token", strings.Join(args, " "))
			}
		}
		return out, errs
	}
	paid := func(grantValue, want string) {
		t.Helper()
		h := http.Header{"Content-Type": {"application/json"}}
		if grantValue != "" {
			h.Set(protocol.HeaderGrant, grantValue)
		}
		resp := b.Do("POST", "/llm/anthropic/v1/messages", boxToken, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10}`), h)
		if resp.StatusCode != 200 || resp.Header.Get(protocol.HeaderPayer) != want {
			t.Fatalf("call = %d paid by %q, want 200 by %q: %s", resp.StatusCode, resp.Header.Get(protocol.HeaderPayer), want, resp.Body)
		}
	}

	out, errs := cli(ownerKey+"\n", "box", "payer", "alpha", "owner", "--principal", "github:own")
	if !strings.Contains(out, "paid by: owner github:own") || !strings.Contains(errs, "API key") {
		t.Errorf("box payer owner = %q %q", out, errs)
	}
	paid("", "owner github:own")

	if out, _ := cli(visitorKey+"\n", "visitor", "set", "github:ann"); !strings.Contains(out, "setup token") {
		t.Errorf("visitor set = %q, want it to say a setup token", out)
	}
	if out, _ := cli("", "visitor", "list"); !strings.Contains(out, "github:ann") || !strings.Contains(out, "setup token") {
		t.Errorf("visitor list = %q, want github:ann and its kind", out)
	}

	out, errs = cli("", "grant", "issue", "alpha", "github:ann", "--ttl", "30m")
	value := strings.TrimSpace(out)
	if !protocol.IsGrantValue(value) || !strings.Contains(errs, "shown this once") || strings.Contains(errs, "warning") {
		t.Fatalf("grant issue = %q %q, want the value alone on stdout, no warning", out, errs)
	}
	g, err := b.Server.Store.GrantByHash(ctx, token.Hash(value))
	if err != nil || g.ExpiresAt.Sub(g.CreatedAt) != 30*time.Minute {
		t.Fatalf("the grant issued = %+v, %v, want one of 30m", g, err)
	}
	paid(value, "visitor github:ann")
	if _, errs := cli("", "grant", "issue", "alpha", "github:nobody"); !strings.Contains(errs, "warning: github:nobody holds no credential") {
		t.Errorf("grant issue to a principal with no credential = %q, want a warning", errs)
	}
	out, _ = cli("", "grant", "list", "alpha")
	if !strings.Contains(out, g.ID) || !strings.Contains(out, "current") || strings.Contains(out, "active") || strings.Contains(out, value) {
		t.Errorf("grant list = %q, want %s current (as the page and API say) and no value", out, g.ID)
	}
	cli("", "grant", "revoke", g.ID)
	paid(value, "owner github:own")
	if out, _ := cli("", "grant", "list", "alpha"); !strings.Contains(out, "revoked") {
		t.Errorf("grant list after revoking = %q, want it revoked", out)
	}

	cli("", "budget", "set", "alpha", "25")
	cli("", "budget", "set", "alpha", "$0.50", "--principal", "github:ann")
	until(t, "three calls recorded", func() bool {
		us, _ := b.Server.Store.ListUsage(ctx, "alpha", month)
		n := int64(0)
		for _, u := range us {
			n += u.Calls
		}
		return n == 3
	})
	for _, args := range [][]string{{"budget", "list", "alpha"}, {"spend", "alpha"}, {"spend", "alpha", "--month", "2020-01"}} {
		want, _, code := runWith(t, local, "", args...)
		if code != 0 {
			t.Fatalf("boxbroker %s on the store = %d", strings.Join(args, " "), code)
		}
		if got, _ := cli("", args...); got != want {
			t.Errorf("boxbroker %s through the admin API printed\n%s\nwant, as from the store,\n%s", strings.Join(args, " "), got, want)
		}
	}
	if out, _ := cli("", "budget", "list", "alpha"); !strings.Contains(out, "github:ann  $0.50") {
		t.Errorf("budget list = %q, want ann's budget", out)
	}
	cli("", "budget", "remove", "--yes", "alpha", "--principal", "github:ann")
	cli("", "budget", "remove", "--yes", "alpha")
	if out, _ := cli("", "budget", "list", "alpha"); !strings.Contains(out, "has no budget") {
		t.Errorf("budget list after removing both = %q", out)
	}

	cli("", "box", "pause", "alpha")
	if resp := b.Do("POST", "/llm/anthropic/v1/messages", boxToken, []byte(`{}`), nil); resp.StatusCode != 403 {
		t.Errorf("call after box pause = %d, want 403", resp.StatusCode)
	}
	if out, _ := cli("", "box", "pause", "alpha"); !strings.Contains(out, "already paused") {
		t.Errorf("box pause of a paused box = %q", out)
	}
	cli("", "box", "resume", "alpha")

	cli("", "box", "payer", "alpha", "shared")
	paid("", "shared")
	if _, err := b.Server.Store.Credential(ctx, payer.OwnerAnthropic("alpha")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner's credential after box payer shared: %v, want removed", err)
	}
	cli("", "visitor", "remove", "--yes", "github:ann")

	refused := []struct {
		args []string
		want string
	}{
		{[]string{"grant", "issue", "nobox", "github:ann"}, "no box named nobox"},
		{[]string{"grant", "revoke", "grt_0000000000000000"}, "no grant grt_0000000000000000"},
		{[]string{"visitor", "remove", "--yes", "github:ann"}, "holds no credential"},
		{[]string{"budget", "remove", "--yes", "alpha"}, "no budget of its own"},
		{[]string{"spend", "nobox"}, "no box named nobox"},
		{[]string{"box", "pause", "nobox"}, "no box named nobox"},
	}
	for _, tt := range refused {
		if code, _, errs := runEnv(t, remote, "", tt.args...); code != 1 || !strings.Contains(errs, tt.want) {
			t.Errorf("boxbroker %s = %d %q, want 1 saying %q", strings.Join(tt.args, " "), code, errs, tt.want)
		}
	}
}
