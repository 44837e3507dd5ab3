package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// byToken is what an audit row of an action made through the admin API
// with the admin token tok ends with: " (by admin token ID)".
func byToken(t *testing.T, b *brokertest.Broker, tok string) string {
	t.Helper()
	rec, err := b.Server.Store.AdminTokenByHash(context.Background(), token.Hash(tok))
	if err != nil {
		t.Fatal(err)
	}
	return " (by admin token " + rec.ID + ")"
}

// openHostProposal puts box's unknown hosts in ask mode and opens a
// proposal of box for a tunnel to host, as the proxy does on a refused
// CONNECT admitted with the box's token tok; it returns the proposal's ID.
func openHostProposal(t *testing.T, b *brokertest.Broker, tok, box, host string) string {
	t.Helper()
	decode(t, "PUT ask", b.Admin("PUT", "/api/boxes/"+box+"/asks/"+approval.ScopeHosts, b.AdminToken, nil), 200, nil)
	v, err := b.Server.Approvals.Refused(context.Background(), approval.Attempt{Attempt: store.Attempt{Box: box, Kind: store.ProposalHost,
		Method: http.MethodConnect, Host: host, Reason: "no secret"}, TokenHash: token.Hash(tok)})
	if err != nil || v.Proposal.ID == "" {
		t.Fatalf("open a proposal of %s for %s: %+v, %v", box, host, v, err)
	}
	return v.Proposal.ID
}

// TestProposals_DecisionNamesTheAdminTokenAndIsNotReplayed: with two
// admin tokens, a proposal approved through the admin API names the
// token that approved it (admin: and its ID), not the API alone, and so
// does its audit row, so a decision can be traced to the token to revoke; the same approval sent
// again is 409 and leaves the first decision, and who made it, as it
// was; a denial after it withdraws it, naming its own token, and a second
// denial is 409.
func TestProposals_DecisionNamesTheAdminTokenAndIsNotReplayed(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	ctx := context.Background()
	second, rec, err := operator.MintRole(ctx, b.Server.Store, "second", store.AdminOperator, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.Server.Store.AdminTokenByHash(ctx, token.Hash(b.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	id := openHostProposal(t, b, tok, "alpha", "one.example:443")
	var p operator.ProposalView
	decode(t, "approve with the second token", b.Admin("POST", "/api/proposals/"+id+"/approve", second, operator.Decision{For: "15m"}), 200, &p)
	if p.DecidedBy != "admin:"+rec.ID {
		t.Errorf("decided_by after approving with the second token = %q, want %q", p.DecidedBy, "admin:"+rec.ID)
	}
	refusal(t, "approve again with the first token", b.Admin("POST", "/api/proposals/"+id+"/approve", b.AdminToken, operator.Decision{For: "always"}), 409)
	got, err := b.Server.Store.Proposal(ctx, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.ProposalApproved || got.DecidedBy != "admin:"+rec.ID || got.Until.IsZero() || got.Until.After(time.Now().Add(16*time.Minute)) {
		t.Errorf("proposal after the replays = %s by %q until %v, want approved by %q for 15m", got.State, got.DecidedBy, got.Until, "admin:"+rec.ID)
	}

	entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, e := range entries {
		named = named || strings.HasPrefix(e.Message, "approved proposal "+id) && strings.HasSuffix(e.Message, byToken(t, b, second))
	}
	if !named {
		t.Errorf("no audit row of the approval names the second admin token: %+v", entries)
	}
	decode(t, "deny after approval (a withdrawal)", b.Admin("POST", "/api/proposals/"+id+"/deny", b.AdminToken, nil), 200, &p)
	if p.State != store.ProposalDenied || p.DecidedBy != "admin:"+first.ID {
		t.Errorf("after the withdrawal = %s by %q, want denied by %q", p.State, p.DecidedBy, "admin:"+first.ID)
	}
	refusal(t, "deny again", b.Admin("POST", "/api/proposals/"+id+"/deny", b.AdminToken, nil), 409)

	denied := openHostProposal(t, b, tok, "alpha", "two.example:443")
	decode(t, "deny with the first token", b.Admin("POST", "/api/proposals/"+denied+"/deny", b.AdminToken, nil), 200, &p)
	if p.DecidedBy != "admin:"+first.ID {
		t.Errorf("decided_by after denying with the first token = %q, want %q", p.DecidedBy, "admin:"+first.ID)
	}
}

// TestProposals_RemovedBoxTakesItsApprovals: a box holding an approval
// for always and a pending proposal is removed and a box of the same
// name added (another owner's, say): approving the old proposal is 404,
// and the new box's identical attempt is not approved by the old box's
// approval.
func TestProposals_RemovedBoxTakesItsApprovals(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	ctx := context.Background()
	approved := openHostProposal(t, b, tok, "alpha", "one.example:443")
	decode(t, "approve for always", b.Admin("POST", "/api/proposals/"+approved+"/approve", b.AdminToken, operator.Decision{For: "always"}), 200, nil)
	pending := openHostProposal(t, b, tok, "alpha", "two.example:443")
	attempt := approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalHost, Method: http.MethodConnect, Host: "one.example:443", Reason: "no secret"}, TokenHash: token.Hash(tok)}
	if v, err := b.Server.Approvals.Refused(ctx, attempt); err != nil || !v.Approved {
		t.Fatalf("the approved attempt before removal: %+v, %v; want approved", v, err)
	}

	if r := b.Admin("DELETE", "/api/boxes/alpha", b.AdminToken, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("remove alpha = %d %s", r.StatusCode, r.Body)
	}
	refusal(t, "approve the removed box's proposal", b.Admin("POST", "/api/proposals/"+pending+"/approve", b.AdminToken, operator.Decision{For: "always"}), 404)
	if msg := refusal(t, "GET /api/proposals/123", b.Admin("GET", "/api/proposals/123", b.AdminToken, nil), 404); !strings.Contains(msg, "No proposal has that ID") {
		t.Errorf("GET /api/proposals/123 = %q, want it to say no proposal has that ID", msg)
	}
	attempt.TokenHash = token.Hash(b.AddBox("alpha"))
	if v, err := b.Server.Approvals.Refused(ctx, attempt); err != nil || v.Approved {
		t.Errorf("the same attempt by the new alpha: %+v, %v; want it not approved", v, err)
	}
	for _, id := range []string{approved, pending} {
		if p, err := b.Server.Store.Proposal(ctx, id, time.Now()); err == nil {
			t.Errorf("proposal %s of the removed box is still kept: %+v", id, p)
		}
	}
}

// TestProposals_ApproveWithNoBodyLastsAnHour: the body of POST
// /api/proposals/{id}/approve may be absent, as POST /api/proxy/ca/rotate's
// may, and the approval then lasts an hour; a body present is still read
// and held to its shape.
func TestProposals_ApproveWithNoBodyLastsAnHour(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	id := openHostProposal(t, b, tok, "alpha", "one.example:443")
	refusal(t, "approve with a body of the wrong shape", b.Admin("POST", "/api/proposals/"+id+"/approve", b.AdminToken, map[string]int{"for": 1}), 400)
	var p operator.ProposalView
	decode(t, "approve with no body", b.Admin("POST", "/api/proposals/"+id+"/approve", b.AdminToken, nil), 200, &p)
	if p.State != store.ProposalApproved || p.Until == nil || p.DecidedAt == nil {
		t.Fatalf("approved with no body: %+v, want approved with an until", p)
	}
	until, err1 := time.Parse(time.RFC3339, *p.Until)
	at, err2 := time.Parse(time.RFC3339, *p.DecidedAt)
	if err1 != nil || err2 != nil || until.Sub(at) != time.Hour {
		t.Errorf("approved with no body from %s until %s, want an hour", *p.DecidedAt, *p.Until)
	}
}

// TestAsks_SecretScopeNamesASecret: the admin API refuses, 400, to put
// secret:NAME in ask mode for a NAME no secret could have (lower-case),
// as the CLI does, and takes it out.
func TestAsks_SecretScopeNamesASecret(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	resp := b.Admin("PUT", "/api/boxes/alpha/asks/secret:github", b.AdminToken, nil)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, "^[A-Z][A-Z0-9_]{0,39}$") {
		t.Errorf("PUT ask secret:github = %d %s, want 400 naming the secret name's pattern", resp.StatusCode, resp.Body)
	}
	if resp := b.Admin("DELETE", "/api/boxes/alpha/asks/secret:github", b.AdminToken, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("DELETE ask secret:github = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}
