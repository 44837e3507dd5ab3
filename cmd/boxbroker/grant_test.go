package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

func TestCLI_PayerVisitorsAndGrants(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	const ownerKey = "sk-ant-api03-CLIOWNERKEY"
	const visitorKey = "sk-ant-oat01-CLIVISITORTOKEN"
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		// out and errs must hold these; secret must appear in neither.
		out, errs string
	}{
		{"owner payer", ownerKey + "\n", []string{"box", "payer", "salad", "owner", "--principal", "github:own"}, 0, "paid by: owner github:own", "API key"},
		{"box list says so", "", []string{"box", "list"}, 0, "owner github:own", ""},
		{"owner key in argv", "", []string{"box", "payer", "salad", "owner", ownerKey}, 2, "", "stdin"},
		{"owner with no key", "", []string{"box", "payer", "salad", "owner"}, 1, "", "no value on stdin"},
		{"shared with a principal", "", []string{"box", "payer", "salad", "shared", "--principal", "github:own"}, 2, "", "shared payer has none"},
		{"bad principal", "k\n", []string{"box", "payer", "salad", "owner", "--principal", "git hub"}, 2, "", "not a principal"},
		{"no such box", "k\n", []string{"box", "payer", "nobox", "owner"}, 1, "", "no box named nobox"},
		{"visitor set", visitorKey + "\n", []string{"visitor", "set", "github:vee"}, 0, "setup token", ""},
		{"visitor key in argv", "", []string{"visitor", "set", "github:vee", visitorKey}, 2, "", "stdin"},
		{"visitor bad principal", "k\n", []string{"visitor", "set", "vee vee"}, 2, "", "not a principal"},
		{"visitor list", "", []string{"visitor", "list"}, 0, "github:vee", ""},
		{"visitor list says the kind", "", []string{"visitor", "list"}, 0, "setup token", ""},
		{"grant over the bound", "", []string{"grant", "issue", "salad", "github:vee", "--ttl", "25h"}, 2, "", "at most 24h"},
		{"grant zero ttl", "", []string{"grant", "issue", "salad", "github:vee", "--ttl", "0s"}, 2, "", "more than 0"},
		{"grant no box", "", []string{"grant", "issue", "nobox", "github:vee"}, 1, "", "no box named nobox"},
		{"grant revoke unknown", "", []string{"grant", "revoke", "grt_nothing"}, 1, "", "no grant grt_nothing"},
		{"shared payer", "", []string{"box", "payer", "salad", "shared"}, 0, "paid by: shared", "removed salad's owner's credential"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := run(t, dir, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errs, tt.errs) {
				t.Errorf("boxbroker %s = %d %q %q, want %d with %q and %q", strings.Join(tt.args, " "), code, out, errs, tt.code, tt.out, tt.errs)
			}
			for _, secret := range []string{ownerKey, visitorKey} {
				if strings.Contains(out+errs, secret) {
					t.Errorf("boxbroker %s printed a credential", strings.Join(tt.args, " "))
				}
			}
		})
	}

	value, errs, code := run(t, dir, "", "grant", "issue", "salad", "github:vee", "--ttl", "20m")
	value = strings.TrimSpace(value)
	if code != 0 || !strings.HasPrefix(value, "bbg_") || !protocol.IsGrantValue(value) {
		t.Fatalf("grant issue = %d %q %q", code, value, errs)
	}
	id := strings.Fields(errs)[1]
	if !strings.HasPrefix(id, "grt_") || strings.Contains(errs, value) {
		t.Fatalf("grant issue stderr = %q, want the ID and not the value", errs)
	}
	list, _, _ := run(t, dir, "", "grant", "list", "salad")
	if !strings.Contains(list, id) || !strings.Contains(list, "current") || strings.Contains(list, "active") || strings.Contains(list, value) {
		t.Errorf("grant list = %q, want %s current (as the page and API say) and no value", list, id)
	}
	if out, errs, code := run(t, dir, "", "grant", "revoke", id); code != 0 {
		t.Errorf("grant revoke = %d %q %q", code, out, errs)
	}
	list, _, _ = run(t, dir, "", "grant", "list", "salad")
	if !strings.Contains(list, "revoked") {
		t.Errorf("grant list after revoke = %q", list)
	}
	if _, _, code := run(t, dir, "n\n", "visitor", "remove", "github:vee"); code != 1 {
		t.Errorf("visitor remove answered no = %d", code)
	}
	if _, _, code := run(t, dir, "", "visitor", "remove", "--yes", "github:vee"); code != 0 {
		t.Errorf("visitor remove --yes = %d", code)
	}
	if out, _, _ := run(t, dir, "", "visitor", "list"); strings.Contains(out, "github:vee") {
		t.Errorf("visitor list after remove = %q", out)
	}
	// The owner's credential goes with the box.
	run(t, dir, ownerKey, "box", "payer", "salad", "owner")
	if out, _, _ := run(t, dir, "", "credential", "list"); !strings.Contains(out, "owner:salad") {
		t.Errorf("credential list = %q, want owner:salad", out)
	}
	run(t, dir, "", "box", "remove", "--yes", "salad")
	if out, _, _ := run(t, dir, "", "credential", "list"); strings.Contains(out, "owner:salad") {
		t.Errorf("credential list after box remove = %q, want no owner:salad", out)
	}
}

// TestCLI_PayerAndGrantsReachARunningBroker runs the commands against a
// running broker's data directory: the broker learns of each change from
// the store alone.
func TestCLI_PayerAndGrantsReachARunningBroker(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.DataDir = dir }})
	token := b.AddBox("salad")
	b.SetCredential(payer.SharedAnthropic, "sk-ant-api03-SHARED")
	b.Report(token, brokertest.Entry("inference", "agent"))
	ctx := context.Background()
	call := func(t *testing.T, grant, wantPayer, wantKey string) {
		t.Helper()
		h := http.Header{"X-Api-Key": {token}}
		if grant != "" {
			h.Set(protocol.HeaderGrant, grant)
		}
		before := len(b.Upstream.Seen())
		resp := b.Do("POST", "/llm/anthropic/v1/messages", "", []byte(`{"model":"m"}`), h)
		if resp.StatusCode != 200 || resp.Header.Get(protocol.HeaderPayer) != wantPayer {
			t.Fatalf("call = %d chant-payer %q, want 200 %q: %s", resp.StatusCode, resp.Header.Get(protocol.HeaderPayer), wantPayer, resp.Body)
		}
		seen := b.Upstream.Seen()[before:]
		if len(seen) != 1 || seen[0].Header.Get("X-Api-Key") != wantKey || seen[0].Header.Get(protocol.HeaderGrant) != "" {
			t.Fatalf("upstream got %d requests, x-api-key %q, want one with %q and no grant", len(seen), seen[0].Header.Get("X-Api-Key"), wantKey)
		}
	}
	poll := func(t *testing.T) {
		t.Helper()
		if err := b.Server.Cache.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	call(t, "", "shared", "sk-ant-api03-SHARED")

	if _, errs, code := run(t, dir, "sk-ant-api03-OWNER\n", "box", "payer", "salad", "owner", "--principal", "github:own"); code != 0 {
		t.Fatalf("box payer owner = %d %q", code, errs)
	}
	poll(t)
	call(t, "", "owner github:own", "sk-ant-api03-OWNER")
	if kept := b.Report(token, brokertest.Entry("inference", "agent")); kept.Payer == nil || protocol.FormatPayerHeader(*kept.Payer) != "owner github:own" {
		t.Errorf("declaration payer = %v, want owner github:own", kept.Payer)
	}

	value, errs, code := run(t, dir, "", "grant", "issue", "salad", "github:vee")
	value = strings.TrimSpace(value)
	if code != 0 || !strings.Contains(errs, "holds no credential") {
		t.Fatalf("grant issue before the visitor's credential = %d %q, want a warning", code, errs)
	}
	id := strings.Fields(errs)[1]
	call(t, value, "owner github:own", "sk-ant-api03-OWNER")
	if _, errs, code := run(t, dir, "sk-ant-api03-VISITOR\n", "visitor", "set", "github:vee"); code != 0 {
		t.Fatalf("visitor set = %d %q", code, errs)
	}
	call(t, value, "visitor github:vee", "sk-ant-api03-VISITOR")
	if _, errs, code := run(t, dir, "", "grant", "revoke", id); code != 0 {
		t.Fatalf("grant revoke = %d %q", code, errs)
	}
	call(t, value, "owner github:own", "sk-ant-api03-OWNER")

	if _, errs, code := run(t, dir, "", "box", "payer", "salad", "shared"); code != 0 {
		t.Fatalf("box payer shared = %d %q", code, errs)
	}
	poll(t)
	call(t, "", "shared", "sk-ant-api03-SHARED")
	if _, err := b.Server.Store.Credential(ctx, payer.OwnerAnthropic("salad")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner credential after box payer shared: %v, want ErrNotFound", err)
	}
}
