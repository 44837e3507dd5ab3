package admin_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/token"
)

func TestAdmin_Grants(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	box := b.AddBox("alpha")
	b.AddBox("beta")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.Report(box, brokertest.Entry("inference", "agent"))
	decode(t, "PUT visitor", b.Admin("PUT", "/api/visitors/github:ann", tok, admin.CredentialValue{Value: visitorKey}), 200, nil)

	var issued operator.IssuedGrant
	resp := b.Admin("POST", "/api/boxes/alpha/grants", tok, operator.NewGrant{Principal: "github:ann", TTL: "1h"})
	decode(t, "POST grant", resp, http.StatusCreated, &issued)
	g, annValue := issued.Grant, issued.Value
	if !protocol.IsGrantValue(issued.Value) || g.Box != "alpha" || g.Principal != "github:ann" || g.State != "current" || !issued.VisitorCredential {
		t.Fatalf("POST grant = %+v, want a current grant for github:ann on alpha, with a value, the visitor holding a credential", issued)
	}
	issuedAt, _ := time.Parse(time.RFC3339, g.IssuedAt)
	expires, _ := time.Parse(time.RFC3339, *g.ExpiresAt)
	if d := expires.Sub(issuedAt); d != time.Hour {
		t.Errorf("POST grant ttl 1h: expires %v after issue, want 1h", d)
	}
	// In force at the box's very next call.
	b.PaidBy(t, box, issued.Value, "visitor github:ann", visitorKey)

	var list operator.GrantList
	resp = b.Admin("GET", "/api/boxes/alpha/grants", tok, nil)
	decode(t, "GET grants", resp, 200, &list)
	if len(list.Grants) != 1 || list.Grants[0].ID != g.ID || list.Grants[0].State != "current" || list.Grants[0].RevokedAt != nil {
		t.Errorf("GET grants = %+v, want the one current grant", list.Grants)
	}
	if bytes.Contains(resp.Body, []byte(issued.Value)) || bytes.Contains(resp.Body, []byte(token.Hash(issued.Value))) {
		t.Errorf("GET grants shows the grant's value or hash: %s", resp.Body)
	}
	decode(t, "GET beta's grants", b.Admin("GET", "/api/boxes/beta/grants", tok, nil), 200, &list)
	if len(list.Grants) != 0 {
		t.Errorf("GET beta's grants = %+v, want none", list.Grants)
	}

	// The default lifetime, and a principal with no credential: issued, and said so.
	resp = b.Admin("POST", "/api/boxes/alpha/grants", tok, operator.NewGrant{Principal: "github:bob"})
	decode(t, "POST grant with no ttl", resp, http.StatusCreated, &issued)
	issuedAt, _ = time.Parse(time.RFC3339, issued.Grant.IssuedAt)
	expires, _ = time.Parse(time.RFC3339, *issued.Grant.ExpiresAt)
	if d := expires.Sub(issuedAt); d != grant.DefaultTTL || issued.VisitorCredential {
		t.Errorf("POST grant with no ttl = %v long, visitorCredential %v; want %v, false", d, issued.VisitorCredential, grant.DefaultTTL)
	}
	b.PaidBy(t, box, issued.Value, "shared", sharedKey) // bob holds no credential

	if resp := b.Admin("DELETE", "/api/grants/"+g.ID, tok, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE grant = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	decode(t, "GET grants after revoking", b.Admin("GET", "/api/boxes/alpha/grants", tok, nil), 200, &list)
	for _, lg := range list.Grants {
		if lg.ID == g.ID && (lg.State != "revoked" || lg.RevokedAt == nil) {
			t.Errorf("revoked grant listed as %+v, want revoked", lg)
		}
	}
	// Revocation is in force at the next call: ignored, not refused.
	b.PaidBy(t, box, annValue, "shared", sharedKey)
	if resp := b.Admin("DELETE", "/api/grants/"+g.ID, tok, nil); resp.StatusCode != 204 {
		t.Errorf("DELETE grant again = %d %s, want 204 (revoking is idempotent)", resp.StatusCode, resp.Body)
	}

	bad := []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"ttl over the bound", "POST", "/api/boxes/alpha/grants", operator.NewGrant{Principal: "github:ann", TTL: "25h"}, 400},
		{"negative ttl", "POST", "/api/boxes/alpha/grants", operator.NewGrant{Principal: "github:ann", TTL: "-1m"}, 400},
		{"ttl not a duration", "POST", "/api/boxes/alpha/grants", operator.NewGrant{Principal: "github:ann", TTL: "soon"}, 400},
		{"ttl as a number", "POST", "/api/boxes/alpha/grants", map[string]any{"principal": "github:ann", "ttl": 900}, 400},
		{"no principal", "POST", "/api/boxes/alpha/grants", operator.NewGrant{TTL: "1m"}, 400},
		{"principal with a space", "POST", "/api/boxes/alpha/grants", operator.NewGrant{Principal: "github: ann"}, 400},
		{"no box", "POST", "/api/boxes/nobox/grants", operator.NewGrant{Principal: "github:ann"}, 404},
		{"list of no box", "GET", "/api/boxes/nobox/grants", nil, 404},
		{"revoke unknown", "DELETE", "/api/grants/grt_0000000000000000", nil, 404},
		{"revoke bad id", "DELETE", "/api/grants/a%20b", nil, 400},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			refusal(t, tt.method+" "+tt.path, b.Admin(tt.method, tt.path, tok, tt.body), tt.status)
		})
	}
}
