package ui_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestOwnerPage_BrowserApprovesAProposal signs in to the owner's page in
// headless Chromium, finds a refused request under Waiting for you,
// approves it with the row's form (its CSRF secret and all), and the
// box's retried request is served.
func TestOwnerPage_BrowserApprovesAProposal(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s (apt-get install -y chromium): the owner's page is not tested in a browser", chromium)
	}
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

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // the test may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	tctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
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
