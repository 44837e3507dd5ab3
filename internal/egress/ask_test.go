package egress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/webhook"
)

// askEnv is newEnv with ECHO's rules allowing only GET /repos/acme/**
// and its owner asking about requests outside them.
func askEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, []string{"GET /repos/acme/**"}, "")
	if r := e.br.Admin("PUT", "/api/boxes/shop/asks/"+approval.SecretScope(secretName), e.br.AdminToken, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("PUT asks = %d %s", r.StatusCode, r.Body)
	}
	return e
}

// post sends POST /egress/ECHO<path> as the box and returns the status,
// the refusal's message, and how many requests reached the host.
func (e *env) post(t *testing.T, path string) (int, string, int) {
	t.Helper()
	before := len(e.echo.Seen())
	resp, body := e.do(t, http.MethodPost, "/egress/ECHO"+path, http.Header{"Authorization": {"Bearer " + e.token}}, nil)
	_, msg := brokertest.Refusal(body)
	return resp.StatusCode, msg, len(e.echo.Seen()) - before
}

// pending lists the box's pending proposals through the admin API.
func (e *env) pending(t *testing.T) []operator.ProposalView {
	t.Helper()
	r := e.br.Admin("GET", "/api/proposals?box=shop&state=pending", e.br.AdminToken, nil)
	var list operator.ProposalList
	if r.StatusCode != http.StatusOK || json.Unmarshal(r.Body, &list) != nil {
		t.Fatalf("GET /api/proposals = %d %s", r.StatusCode, r.Body)
	}
	return list.Proposals
}

// TestEgress_AskOpensAProposalAndApprovalServesTheRetry: a request
// outside ECHO's rules is refused without reaching the host, and opens a
// proposal the refusal names with the command to approve it; the same
// request again joins it; once approved for an hour, the same request is
// forwarded, and another path or method is still refused.
func TestEgress_AskOpensAProposalAndApprovalServesTheRetry(t *testing.T) {
	e := askEnv(t)
	code, msg, reached := e.post(t, "/repos/acme/app/issues")
	if code != http.StatusForbidden || reached != 0 {
		t.Fatalf("POST outside the rules = %d (host reached %d times), want 403 and none", code, reached)
	}
	list := e.pending(t)
	if len(list) != 1 {
		t.Fatalf("pending = %+v, want one", list)
	}
	p := list[0]
	if p.Box != "shop" || p.Kind != store.ProposalRule || p.Secret != secretName || p.Method != "POST" || p.Path != "/repos/acme/app/issues" || p.Count != 1 {
		t.Errorf("proposal = %+v, want shop's POST /repos/acme/app/issues with ECHO", p)
	}
	for _, w := range []string{"allows only", "proposal " + p.ID, "boxbroker approve " + p.ID} {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal = %q, want it to say %q", msg, w)
		}
	}
	if strings.Contains(p.Reason, e.value) || strings.Contains(p.Reason+p.Path, e.token) {
		t.Errorf("the proposal holds the value or the token")
	}
	if code, _, _ := e.post(t, "/repos/acme/app/issues"); code != http.StatusForbidden {
		t.Fatalf("the same request again = %d, want 403", code)
	}
	if list := e.pending(t); len(list) != 1 || list[0].Count != 2 {
		t.Fatalf("pending after the same request = %+v, want one with count 2", list)
	}
	r := e.br.Admin("POST", "/api/proposals/"+p.ID+"/approve", e.br.AdminToken, map[string]string{"for": "1h"})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("approve = %d %s", r.StatusCode, r.Body)
	}
	code, msg, reached = e.post(t, "/repos/acme/app/issues")
	if code != http.StatusOK || reached != 1 {
		t.Fatalf("the same request after approval = %d %q (host reached %d), want 200 once", code, msg, reached)
	}
	if seen := e.echo.Seen(); seen[len(seen)-1].Path != "/base/repos/acme/app/issues" {
		t.Errorf("host saw %s, want /base/repos/acme/app/issues", seen[len(seen)-1].Path)
	}
	for _, path := range []string{"/repos/acme/app/issues/1", "/repos/acme/other/issues", "/repos/acme/app%2Fissues"} {
		if code, _, reached := e.post(t, path); code == http.StatusOK || reached != 0 {
			t.Errorf("POST %s after approving another = %d (host reached %d), want refused", path, code, reached)
		}
	}
	if r := e.br.Admin("POST", "/api/proposals/"+p.ID+"/approve", e.br.AdminToken, map[string]string{"for": "1h"}); r.StatusCode != http.StatusConflict {
		t.Errorf("approve again = %d %s, want 409", r.StatusCode, r.Body)
	}
}

// TestEgress_WithdrawnApprovalStopsAtTheNextRequest: denying a proposal
// approved always withdraws the approval: the box's next identical
// request is refused, naming the denial, without reaching the host; a
// second denial is a 409.
func TestEgress_WithdrawnApprovalStopsAtTheNextRequest(t *testing.T) {
	e := askEnv(t)
	e.post(t, "/repos/acme/app/issues")
	p := e.pending(t)[0]
	if r := e.br.Admin("POST", "/api/proposals/"+p.ID+"/approve", e.br.AdminToken, map[string]string{"for": "always"}); r.StatusCode != http.StatusOK {
		t.Fatalf("approve = %d %s", r.StatusCode, r.Body)
	}
	if code, msg, reached := e.post(t, "/repos/acme/app/issues"); code != http.StatusOK || reached != 1 {
		t.Fatalf("after approval = %d %q (host reached %d), want 200 once", code, msg, reached)
	}
	r := e.br.Admin("POST", "/api/proposals/"+p.ID+"/deny", e.br.AdminToken, nil)
	var v operator.ProposalView
	if r.StatusCode != http.StatusOK || json.Unmarshal(r.Body, &v) != nil || v.State != store.ProposalDenied {
		t.Fatalf("deny the approval = %d %s, want 200 and denied", r.StatusCode, r.Body)
	}
	code, msg, reached := e.post(t, "/repos/acme/app/issues")
	if code != http.StatusForbidden || reached != 0 || !strings.Contains(msg, "denied") {
		t.Errorf("after the withdrawal = %d %q (host reached %d), want 403 naming the denial", code, msg, reached)
	}
	if r := e.br.Admin("POST", "/api/proposals/"+p.ID+"/deny", e.br.AdminToken, nil); r.StatusCode != http.StatusConflict {
		t.Errorf("deny again = %d %s, want 409", r.StatusCode, r.Body)
	}
}

// TestEgress_DeniedProposalStaysRefused: a denied proposal's request is
// refused again, naming the denial, and opens no new proposal.
func TestEgress_DeniedProposalStaysRefused(t *testing.T) {
	e := askEnv(t)
	e.post(t, "/repos/acme/app/issues")
	p := e.pending(t)[0]
	if r := e.br.Admin("POST", "/api/proposals/"+p.ID+"/deny", e.br.AdminToken, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("deny = %d %s", r.StatusCode, r.Body)
	}
	code, msg, reached := e.post(t, "/repos/acme/app/issues")
	if code != http.StatusForbidden || reached != 0 || !strings.Contains(msg, "denied") {
		t.Errorf("after deny = %d %q (host reached %d), want 403 naming the denial", code, msg, reached)
	}
	if list := e.pending(t); len(list) != 0 {
		t.Errorf("pending after deny = %+v, want none", list)
	}
}

// TestEgress_NoAskNoProposal: without ask mode a refusal opens nothing
// and says nothing of proposals.
func TestEgress_NoAskNoProposal(t *testing.T) {
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, []string{"GET /repos/acme/**"}, "")
	code, msg, _ := e.post(t, "/repos/acme/app/issues")
	if code != http.StatusForbidden || strings.Contains(msg, "proposal") {
		t.Errorf("refusal = %d %q, want 403 naming no proposal", code, msg)
	}
	if list := e.pending(t); len(list) != 0 {
		t.Errorf("pending = %+v, want none", list)
	}
}

// TestEgress_ProposalNeverHoldsTheBoxToken: a request outside the rules
// whose path holds the box's token opens no proposal (the page and the
// webhook would show it).
func TestEgress_ProposalNeverHoldsTheBoxToken(t *testing.T) {
	e := askEnv(t)
	if code, _, reached := e.post(t, "/x/"+e.token); code != http.StatusForbidden || reached != 0 {
		t.Fatalf("POST with the token in the path = %d, want 403", code)
	}
	if list := e.pending(t); len(list) != 0 {
		t.Errorf("pending = %+v, want none", list)
	}
}

// TestEgress_ProposalWebhook: with --proposal-webhook set, the proposal a
// refusal opens is POSTed, signed, to a loopback receiver, which checks
// the signature; the body names the proposal and holds neither the
// secret's value nor the box's token.
func TestEgress_ProposalWebhook(t *testing.T) {
	key := "whsec_egress_test_0123456789"
	got := make(chan []byte, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(webhook.HeaderSignature) != webhook.Sign([]byte(key), r.Header.Get(webhook.HeaderTimestamp), body) {
			t.Errorf("the webhook's signature does not check")
		}
		got <- body
	}))
	t.Cleanup(recv.Close)
	e := newEnv(t, func(c *server.Config) {
		c.ProposalWebhook, c.ProposalWebhookKey, c.PageURL = recv.URL, key, "https://broker.example/ui/"
	})
	e.br.SetSecretRules("shop", secretName, []string{"GET /repos/acme/**"}, "")
	if err := e.br.Server.Approvals.SetAsk(t.Context(), "shop", approval.SecretScope(secretName), true); err != nil {
		t.Fatal(err)
	}
	code, msg, _ := e.post(t, "/repos/acme/app/issues")
	if code != http.StatusForbidden || !strings.Contains(msg, "https://broker.example/ui/") {
		t.Fatalf("refusal = %d %q, want 403 naming the page", code, msg)
	}
	select {
	case body := <-got:
		if !strings.Contains(string(body), "boxbroker approve p-") || !strings.Contains(string(body), "/repos/acme/app/issues") {
			t.Errorf("webhook body %s does not name the proposal", body)
		}
		if strings.Contains(string(body), e.value) || strings.Contains(string(body), e.token) || strings.Contains(string(body), key) {
			t.Errorf("webhook body holds the value, the token or the key")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook received")
	}
}
