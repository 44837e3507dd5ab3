package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// askingBox enrols alpha with a secret ECHO whose rules allow only
// GET /ok/** and whose owner asks about the rest, and returns alpha's
// token.
func askingBox(t *testing.T, b *brokertest.Broker) string {
	t.Helper()
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(host.Close)
	tok := b.AddBox("alpha")
	b.SetSecret("alpha", "ECHO", host.URL, "sk_page_proposals_0123456789")
	b.SetSecretRules("alpha", "ECHO", []string{"GET /ok/**"}, "")
	b.Report(tok, brokertest.Entry(protocol.Egress, "ECHO"))
	if err := b.Server.Approvals.SetAsk(t.Context(), "alpha", approval.SecretScope("ECHO"), true); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestUI_WaitingForYouApproves: a refused request in ask mode is listed
// at the top of the list of boxes, what it tried and why; approving it
// there for an hour serves the box's retry, takes it off the list, and
// is audited; a post without the CSRF secret is refused; deny denies.
func TestUI_WaitingForYouApproves(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := askingBox(t, b)
	cookie, csrf := signedInForm(t, b)
	if p := visit(t, b, "GET", "/ui/", cookie, nil, nil); strings.Contains(p.body, "Waiting for you") {
		t.Errorf("the list shows Waiting for you with nothing waiting")
	}
	if r := b.Do("POST", "/egress/ECHO/write/1", tok, nil, nil); r.StatusCode != http.StatusForbidden {
		t.Fatalf("POST outside the rules = %d, want 403", r.StatusCode)
	}
	ps, err := b.Server.Approvals.List(t.Context(), "alpha", store.ProposalPending)
	if err != nil || len(ps) != 1 {
		t.Fatalf("pending = %+v, %v", ps, err)
	}
	id := ps[0].ID
	p := visit(t, b, "GET", "/ui/", cookie, nil, nil)
	for _, w := range []string{"Waiting for you", id, "POST /write/1 with the secret ECHO", "allows only GET /ok/**"} {
		if !strings.Contains(p.body, w) {
			t.Errorf("the list does not show %q", w)
		}
	}
	if i, j := strings.Index(p.body, "Waiting for you"), strings.Index(p.body, "<h1>Boxes"); i < 0 || j < i {
		t.Errorf("Waiting for you is not above the boxes")
	}
	if p := visit(t, b, "POST", "/ui/proposals/"+id+"/approve", cookie, url.Values{"for": {"1h"}}, nil); p.status == http.StatusSeeOther {
		t.Fatalf("approve without the CSRF secret = %d, want refused", p.status)
	}
	if p := visit(t, b, "POST", "/ui/proposals/"+id+"/approve", cookie, url.Values{"csrf": {csrf}, "for": {"1h"}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("approve = %d %s, want 303", p.status, p.body)
	}
	if r := b.Do("POST", "/egress/ECHO/write/1", tok, nil, nil); r.StatusCode != http.StatusOK {
		t.Errorf("the retry after approval = %d %s, want 200", r.StatusCode, r.Body)
	}
	if p := visit(t, b, "GET", "/ui/", cookie, nil, nil); strings.Contains(p.body, id) {
		t.Errorf("the approved proposal is still listed as waiting")
	}
	entries, err := b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "alpha", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, e := range entries {
		audited = audited || strings.Contains(e.Message, "approved proposal "+id)
	}
	if !audited {
		t.Errorf("no audit entry names the approval")
	}

	b.Do("POST", "/egress/ECHO/write/2", tok, nil, nil)
	ps, _ = b.Server.Approvals.List(t.Context(), "alpha", store.ProposalPending)
	if len(ps) != 1 {
		t.Fatalf("pending = %+v, want one", ps)
	}
	if p := visit(t, b, "POST", "/ui/proposals/"+ps[0].ID+"/deny", cookie, url.Values{"csrf": {csrf}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("deny = %d, want 303", p.status)
	}
	if got, err := b.Server.Approvals.Get(t.Context(), ps[0].ID); err != nil || got.State != store.ProposalDenied || got.DecidedAt.After(time.Now()) {
		t.Errorf("after deny = %s, %v; want denied", got.State, err)
	}
	if r := b.Do("POST", "/egress/ECHO/write/2", tok, nil, nil); r.StatusCode != http.StatusForbidden {
		t.Errorf("the denied request again = %d, want 403", r.StatusCode)
	}
}

// TestUI_WithdrawAnApproval: a box's page lists its approvals in force,
// each with a form to withdraw it; withdrawing one refuses the box's next
// identical request, is audited, and takes it off the list; an approval
// of another box is not withdrawn through this box's page.
func TestUI_WithdrawAnApproval(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := askingBox(t, b)
	other := b.AddBox("beta")
	b.SetSecret("beta", "ECHO", "https://beta.example", "sk_page_proposals_beta_0123456789")
	b.SetSecretRules("beta", "ECHO", []string{"GET /ok/**"}, "")
	b.Report(other, brokertest.Entry(protocol.Egress, "ECHO"))
	if err := b.Server.Approvals.SetAsk(t.Context(), "beta", approval.SecretScope("ECHO"), true); err != nil {
		t.Fatal(err)
	}
	cookie, csrf := signedInForm(t, b)
	approved := func(box, path string) string {
		t.Helper()
		tk := map[string]string{"alpha": tok, "beta": other}[box]
		b.Do("POST", "/egress/ECHO"+path, tk, nil, nil)
		ps, err := b.Server.Approvals.List(t.Context(), box, store.ProposalPending)
		if err != nil || len(ps) != 1 {
			t.Fatalf("pending of %s = %+v, %v", box, ps, err)
		}
		if p := visit(t, b, "POST", "/ui/proposals/"+ps[0].ID+"/approve", cookie, url.Values{"csrf": {csrf}, "for": {"always"}}, nil); p.status != http.StatusSeeOther {
			t.Fatalf("approve = %d %s", p.status, p.body)
		}
		return ps[0].ID
	}
	id := approved("alpha", "/write/1")
	betaID := approved("beta", "/write/1")
	if r := b.Do("POST", "/egress/ECHO/write/1", tok, nil, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("the approved request = %d %s, want 200", r.StatusCode, r.Body)
	}
	p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	for _, w := range []string{"Approvals in force", id, "POST /write/1 with the secret ECHO", "/ui/boxes/alpha/approvals/" + id + "/withdraw"} {
		if !strings.Contains(p.body, w) {
			t.Errorf("alpha's page does not show %q", w)
		}
	}
	if strings.Contains(p.body, betaID) {
		t.Errorf("alpha's page lists beta's approval")
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/approvals/"+betaID+"/withdraw", cookie, url.Values{"csrf": {csrf}}, nil); p.status != http.StatusNotFound {
		t.Errorf("withdraw beta's approval through alpha's page = %d, want 404", p.status)
	}
	if got, err := b.Server.Approvals.Get(t.Context(), betaID); err != nil || got.State != store.ProposalApproved {
		t.Errorf("beta's approval after that = %s, %v; want approved", got.State, err)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/approvals/"+id+"/withdraw", cookie, url.Values{"csrf": {csrf}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("withdraw = %d %s, want 303", p.status, p.body)
	}
	if r := b.Do("POST", "/egress/ECHO/write/1", tok, nil, nil); r.StatusCode != http.StatusForbidden {
		t.Errorf("the request after the withdrawal = %d, want 403", r.StatusCode)
	}
	if p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil); strings.Contains(p.body, "/approvals/"+id+"/withdraw") {
		t.Errorf("the withdrawn approval is still listed")
	}
	entries, err := b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "alpha", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, e := range entries {
		audited = audited || strings.Contains(e.Message, "denied proposal "+id)
	}
	if !audited {
		t.Errorf("no audit entry names the withdrawal")
	}
}
