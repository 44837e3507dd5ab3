package ui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSSO_Browser signs in through the provider stand-in in headless
// Chromium, the page on localhost and the provider on 127.0.0.1 (two
// sites, as in production): the page's SameSite=Strict session cookie,
// set by a callback the provider's redirect reached, must still be sent
// when the browser moves on to the list of boxes.
func TestSSO_Browser(t *testing.T) {
	s := newSSOBrokerAt(t, "localhost", "email", []string{"ops@example.com"}, nil)
	s.idp.SignInAs("operator-1", email("ops@example.com"))
	s.idp.ShowPage(true)
	tctx, bctx := startChromium(t, "single sign-on")
	if err := chromedp.Do(tctx,
		chromedp.Navigate(s.base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#sso")),
		chromedp.Click(chromedp.CSS("#sso")),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("form.signout")),
	); err != nil {
		h, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
		t.Fatalf("browser: sign in with single sign-on: %v\n%s", err, h)
	}
	loc, err := chromedp.Run(tctx, chromedp.Location())
	if err != nil || loc != s.base+"/ui/" {
		t.Errorf("after signing in the browser is at %q (%v), want %s/ui/", loc, err, s.base)
	}
	main, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil || !strings.Contains(main, "alpha") {
		t.Errorf("the list of boxes after signing in = %q (%v), want it to name alpha", main, err)
	}
}
