package admin_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// chromium is Debian's Chromium, which the browser test drives.
const chromium = "/usr/bin/chromium"

// TestOwnerPage_Browser signs in to the owner's page in headless Chromium,
// sees a box with its report, spend and refusals, pauses it and revokes a
// grant through their forms (CSRF secret and all), and saves a screenshot: to $BOXBROKER_SCREENSHOT
// when set (docs/owner-page.png is made so), else to a temporary file.
// A real browser holds the page to what a test client would not: it found
// that Referrer-Policy: no-referrer makes Chromium post "Origin: null".
func TestOwnerPage_Browser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s (apt-get install -y chromium): the owner's page is not tested in a browser", chromium)
	}
	b := brokertest.New(t, brokertest.Options{})
	alpha := b.AddBox("alpha")
	b.AddBox("beta")
	gamma := b.AddBox("gamma")
	report := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["decide"]},{"name":"feedback","broker":"lobby","scope":["agent","passive"]}],` +
		`"listing":{"published":true,"title":"Alpha","line":"Answers questions about the repo"},` +
		`"spend":{"month":"` + time.Now().UTC().Format("2006-01") + `","usd":4.37,"runs":12,"unpriced":1,"byPrincipal":[` +
		`{"principal":"github:ann","usd":3.12,"runs":8,"unpriced":0},{"principal":"github:bob","usd":1.25,"runs":3,"unpriced":0},{"principal":null,"usd":0,"runs":1,"unpriced":1}]}}`
	if r := b.Do("POST", protocol.RouteDeclaration, alpha, []byte(report), nil); r.StatusCode != 200 {
		t.Fatalf("report: %d %s", r.StatusCode, r.Body)
	}
	if r := b.Do("POST", protocol.RouteDeclaration, gamma, []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":[]}],"listing":{"published":false,"title":"Gamma","line":"Not listed yet"}}`), nil); r.StatusCode != 200 {
		t.Fatalf("report: %d %s", r.StatusCode, r.Body)
	}
	b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(`{}`), nil)
	b.Do("POST", "/llm/anthropic/v1/messages", gamma, []byte(`{}`), nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := b.Server.Store.AddFeedback(ctx, store.FeedbackBatch{Box: "alpha", At: time.Now(), Words: []string{"agent"}, Body: []byte(`{"entries":[` + string(rune('0'+i)) + `]}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	_, g, err := grant.Issue(ctx, b.Server.Store, "alpha", "github:ann", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // the test may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1100, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil { // start the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	// A bound on the whole run, so a wedged browser fails the test rather
	// than hanging it; nothing is asserted about how long anything took.
	tctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()

	text := func(what string) string {
		t.Helper()
		s, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatalf("browser: read %s: %v", what, err)
		}
		return s
	}
	if err := chromedp.Do(tctx,
		chromedp.Navigate(b.AdminURL+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("browser: open the sign-in page: %v", err)
	}
	signin := text("the sign-in page")
	if err := chromedp.Do(tctx,
		chromedp.SendKeys(chromedp.ID("token"), b.AdminToken),
		chromedp.Click(chromedp.ID("signin")),
	); err != nil {
		t.Fatalf("browser: sign in: %v", err)
	}
	if err := chromedp.Do(tctx, chromedp.WaitVisible(chromedp.ID("box-alpha"))); err != nil {
		t.Fatalf("browser: after signing in: %v; the page reads:\n%s", err, text("the page after signing in"))
	}
	overview := text("the boxes")
	cookies, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatalf("browser: read document.cookie: %v", err)
	}
	shot, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot: %v", err)
	}
	if !strings.Contains(signin, "Sign in with an admin token") {
		t.Errorf("the page before signing in reads %q, want the sign-in form", signin)
	}
	for _, want := range []string{
		"alpha", "beta", "gamma", "Answers questions about the repo", "inference: decide", "agent, passive", "github:ann", "$3.12", "$4.37",
		"3 batches kept", "never", "does not list agent in its scope (it lists decide)", "Not listed yet",
	} {
		if !strings.Contains(overview, want) {
			t.Errorf("the signed-in page lacks %q; it reads:\n%s", want, overview)
		}
	}
	if strings.Index(overview, "alpha") > strings.Index(overview, "beta") {
		t.Errorf("alpha (listed) is shown after beta (never reported)")
	}
	if strings.Contains(cookies, "boxbroker_session") || strings.Contains(overview, b.AdminToken) {
		t.Errorf("the page's script can read the session cookie (%q) or the page shows the token", cookies)
	}
	if !bytes.HasPrefix(shot, []byte("\x89PNG")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(shot))
	}
	out := os.Getenv("BOXBROKER_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "owner-page.png")
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(shot))

	// A form posted from the page carries its CSRF secret and works.
	pause := chromedp.Search(`//button[contains(., "Pause the box")]`)
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.CSS("#box-alpha h2 a")),
		chromedp.WaitVisible(pause),
		chromedp.Click(pause),
		chromedp.WaitVisible(chromedp.Search(`//button[contains(., "Resume the box")]`)),
	); err != nil {
		t.Fatalf("browser: pause alpha: %v", err)
	}
	boxPage := text("alpha's page")

	// Revoke the grant from the page.
	revoke := chromedp.CSS("#grant-" + g.ID + " button")
	if err := chromedp.Do(tctx,
		chromedp.WaitVisible(revoke),
		chromedp.Click(revoke),
		chromedp.WaitNotPresent(revoke),
	); err != nil {
		t.Fatalf("browser: revoke the grant: %v", err)
	}
	if got, err := b.Server.Store.GrantByHash(ctx, g.Hash); err != nil || got.RevokedAt.IsZero() {
		t.Errorf("grant after pressing Revoke = revoked at %v, %v, want revoked", got.RevokedAt, err)
	}
	if after := text("alpha's page after revoking"); !strings.Contains(after, "revoked") {
		t.Errorf("alpha's page after revoking does not say the grant is revoked:\n%s", after)
	}
	if bx, err := b.Server.Store.Box(ctx, "alpha"); err != nil || !bx.Paused {
		t.Errorf("alpha after pressing Pause in the browser = paused %v, %v, want paused", bx.Paused, err)
	}
	if !strings.Contains(boxPage, "paused") || !strings.Contains(boxPage, "Recent requests") {
		t.Errorf("alpha's page after pausing reads:\n%s", boxPage)
	}
}
