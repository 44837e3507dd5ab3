package ui_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_BindingAndTokenFromOutsideItsBox: the box's page shows where its
// token is taken from, binds it through its form (audited), names a
// refusal of the token used from outside its box in words, and says, naming
// the host, when a host handed the box's own token back.
func TestUI_BindingAndTokenFromOutsideItsBox(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	b.AddBox("shop")
	cookie, csrf := signedInForm(t, b)
	if p := visit(t, b, "GET", "/ui/boxes/shop", cookie, nil, nil); p.status != 200 || !strings.Contains(p.body, "any address") {
		t.Fatalf("GET /ui/boxes/shop = %d, want it to say the token is taken from any address", p.status)
	}
	if p := visit(t, b, "POST", "/ui/boxes/shop/bind", cookie, url.Values{"csrf": {csrf}, "from": {"10.20.0.0/16, 192.0.2.7"}}, nil); p.status != 303 {
		t.Fatalf("bind = %d %s, want 303", p.status, p.body)
	}
	if p := visit(t, b, "POST", "/ui/boxes/shop/bind", cookie, url.Values{"csrf": {csrf}, "from": {"10.20.0.0/33"}}, nil); p.status != 400 {
		t.Errorf("bind to no CIDR = %d, want 400", p.status)
	}
	box, err := b.Server.Store.Box(ctx, "shop")
	if err != nil || store.FormatFrom(box.From) != "10.20.0.0/16,192.0.2.7/32" {
		t.Fatalf("shop after bind = %v %v, want bound to 10.20.0.0/16 and 192.0.2.7/32", box.From, err)
	}
	if got := adminEntries(t, b, "shop"); len(got) != 1 || !strings.Contains(got[0].Message, "10.20.0.0/16") {
		t.Errorf("shop's admin audit entries = %+v, want the binding", got)
	}
	now := time.Now().UTC()
	err = b.Server.Store.AddAudit(ctx, []store.AuditEntry{
		{Box: "shop", At: now, Method: "GET", Route: "/llm/anthropic/v1/models", Capability: "inference", Status: 403, Reason: capability.ReasonOutside,
			Message: "The token was used from outside its box's addresses: this request came from 203.0.113.9."},
		capability.TokenSeen("shop", "egress", "/egress/GITHUB", "GET", "github.example:443", 200, now),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Server.Store.ReplaceToken(ctx, "shop", store.Rotation{Hash: "0123", TTL: time.Hour, ExpiresAt: now.Add(time.Hour), GraceUntil: now.Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	p := visit(t, b, "GET", "/ui/boxes/shop", cookie, nil, nil)
	for _, want := range []string{"10.20.0.0/16, 192.0.2.7/32", "token used from outside its box", "The box's own token came back", "github.example:443",
		"expires at", "the old token works until"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("GET /ui/boxes/shop does not show %q", want)
		}
	}
}

// TestUI_RotateGivesTheNewTokenTheBoxsTTL: an expired token rotated on the
// page is replaced by one with the box's lifetime, not the old expiry.
func TestUI_RotateGivesTheNewTokenTheBoxsTTL(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	b.AddBox("shop")
	past := time.Now().Add(-time.Minute)
	if err := b.Server.Store.ReplaceToken(ctx, "shop", store.Rotation{Hash: "0123", TTL: 24 * time.Hour, ExpiresAt: past}); err != nil {
		t.Fatal(err)
	}
	cookie, csrf := signedInForm(t, b)
	if p := visit(t, b, "POST", "/ui/boxes/shop/rotate", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 200 {
		t.Fatalf("rotate = %d", p.status)
	}
	box, err := b.Server.Store.Box(ctx, "shop")
	if err != nil || time.Until(box.ExpiresAt) < 23*time.Hour {
		t.Errorf("after rotating on the page: expires at %v (%v), want a day from now", box.ExpiresAt, err)
	}
}
