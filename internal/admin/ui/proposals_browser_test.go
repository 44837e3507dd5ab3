package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestOwnerPage_BrowserApprovesAProposal signs in to the owner's page in
// headless Chromium, finds a refused request under Waiting for you,
// approves it with the row's form (its CSRF secret and all), and the
// box's retried request is served.
func TestOwnerPage_BrowserApprovesAProposal(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := askingBox(t, b)
	if r := b.Do("POST", "/egress/ECHO/write/1", tok, nil, nil); r.StatusCode != http.StatusForbidden {
		t.Fatalf("POST outside the rules = %d, want 403", r.StatusCode)
	}
	ps, err := b.Server.Approvals.List(t.Context(), "alpha", store.ProposalPending)
	if err != nil || len(ps) != 1 {
		t.Fatalf("pending = %+v, %v", ps, err)
	}
	id := ps[0].ID

	tctx, _ := startChromium(t, "the owner's page")
	if err := chromedp.Do(tctx,
		chromedp.Navigate(b.AdminURL+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), b.AdminToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("waiting")),
	); err != nil {
		t.Fatalf("browser: sign in and see Waiting for you: %v", err)
	}
	s, err := chromedp.Run(tctx, chromedp.Text(chromedp.ID("waiting")))
	if err != nil || !strings.Contains(s, id) || !strings.Contains(s, "POST /write/1 with the secret ECHO") {
		t.Fatalf("Waiting for you = %q, %v; want %s and what it tried", s, err, id)
	}
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.CSS("#proposal-"+id+" button[name=approve]")),
		// The list is on the page before the click too: wait for the
		// answer to the form, the page without the proposal.
		chromedp.WaitNotPresent(chromedp.CSS("#proposal-"+id)),
		chromedp.WaitVisible(chromedp.CSS("table.list")),
	); err != nil {
		t.Fatalf("browser: approve: %v", err)
	}
	h, err := chromedp.Run(tctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil || strings.Contains(h, "proposal-"+id) {
		t.Errorf("after approving, the page still lists %s (%v)", id, err)
	}
	if got, err := b.Server.Approvals.Get(t.Context(), id); err != nil || got.State != store.ProposalApproved || got.Until.IsZero() {
		t.Fatalf("after the browser's approval = %+v, %v; want approved for the default hour", got, err)
	}
	if r := b.Do("POST", "/egress/ECHO/write/1", tok, nil, nil); r.StatusCode != http.StatusOK {
		t.Errorf("the box's retry after the approval on the page = %d %s, want 200", r.StatusCode, r.Body)
	}
}
