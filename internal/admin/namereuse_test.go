package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestAdmin_BoxEnrolledUnderARemovedBoxsNameInheritsNothing: a box
// removed (compromised, or given up) had a host approved always, its
// hosts in ask mode and a budget; a new box enrolled later under the
// same name (another team's CI, another owner) starts with none of them:
// what a person approved for the first is never spent by the second.
func TestAdmin_BoxEnrolledUnderARemovedBoxsNameInheritsNothing(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	tok := b.AddBox("alpha")
	id := openHostProposal(t, b, tok, "alpha", "evil.example:443")
	decode(t, "approve always", b.Admin("POST", "/api/proposals/"+id+"/approve", b.AdminToken, map[string]any{"for": "always"}), 200, nil)
	decode(t, "PUT budget", b.Admin("PUT", "/api/boxes/alpha/budgets", b.AdminToken, map[string]any{"usd": 500}), 200, nil)
	if in, err := b.Server.Store.ApprovalsInForce(ctx, "alpha", token.Hash(tok), store.ProposalHost, time.Now()); err != nil || len(in) != 1 {
		t.Fatalf("alpha's approvals in force = %+v, %v, want the one approved, or this test shows nothing", in, err)
	}
	if bs, err := b.Server.Store.ListBudgets(ctx, "alpha"); err != nil || len(bs) != 1 {
		t.Fatalf("alpha's budgets = %+v, %v, want the one set, or this test shows nothing", bs, err)
	}

	decode(t, "DELETE alpha", b.Admin("DELETE", "/api/boxes/alpha", b.AdminToken, nil), 204, nil)
	var again operator.BoxToken
	decode(t, "POST alpha again", b.Admin("POST", "/api/boxes", b.AdminToken, map[string]any{"name": "alpha"}), 201, &again)

	if in, err := b.Server.Store.ApprovalsInForce(ctx, "alpha", token.Hash(again.Token), store.ProposalHost, time.Now()); err != nil || len(in) != 0 {
		t.Errorf("the new alpha's approvals in force = %+v, %v, want none of the removed box's", in, err)
	}
	if asks, err := b.Server.Store.ListAsks(ctx, "alpha"); err != nil || len(asks) != 0 {
		t.Errorf("the new alpha's asks = %v, %v, want none of the removed box's (%s)", asks, err, approval.ScopeHosts)
	}
	resp := b.Admin("GET", "/api/proposals", b.AdminToken, nil)
	if strings.Contains(string(resp.Body), id) {
		t.Errorf("GET /api/proposals after alpha was removed and enrolled again = %s, want none of the removed box's", resp.Body)
	}
	if bs, err := b.Server.Store.ListBudgets(ctx, "alpha"); err != nil || len(bs) != 0 {
		t.Errorf("the new alpha's budgets = %+v, %v, want none of the removed box's", bs, err)
	}
}
