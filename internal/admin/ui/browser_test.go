package ui_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// chromium is Debian's Chromium, which the browser tests drive.
const chromium = "/usr/bin/chromium"

// startChromium starts headless Chromium for one test, with a 1280×900 window,
// and stops it when the test ends. Without Chromium it skips the test,
// saying that untested (e.g. "the owner's page") is not tested in a
// browser. It returns the browser's context and, under it, run: a bound
// of two minutes on the whole run, so that a wedged browser fails the
// test rather than hanging it (nothing is asserted about how long
// anything took). After run has ended, the browser's context can still
// read the page for a failure message.
func startChromium(t *testing.T, untested string) (run, browserCtx context.Context) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s (apt-get install -y chromium): %s is not tested in a browser", chromium, untested)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // the test may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // start the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	run, cancelRun := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(cancelRun)
	return run, bctx
}

// updateScreenshots makes TestOwnerPage_Browser seed a fleet of 40 boxes
// with traffic and write its screenshots into docs/ (the only test that
// writes into the source tree, and only when asked).
var updateScreenshots = flag.Bool("update-screenshots", false, "write docs/owner-page-list.png and docs/owner-page-box.png")

// TestOwnerPage_Browser signs in to the owner's page in headless Chromium,
// sees the list of boxes and its chart, sorts and filters it, sees a box
// with its report, measured and reported spend, budgets and refusals,
// pauses and resumes it, issues a grant through the box page's form
// (reading its value from the one page that shows it) and revokes it,
// sets a secret and a budget, enrols a box and reads its token once,
// every form with its CSRF secret; and no page's HTML, read after each
// step, holds a secret's, credential's, grant's or token's value. It
// saves screenshots of the list and of a box's page into a temporary
// directory, or into docs/ with -update-screenshots.
// A real browser holds the page to what a test client would not: it found
// that Referrer-Policy: no-referrer makes Chromium post "Origin: null".
func TestOwnerPage_Browser(t *testing.T) {
	// An upstream reporting the usage of a sizeable turn, so that the
	// measured spend reads in dollars and cents.
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":48000,"output_tokens":2100}}`)
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: upstream})
	alpha := b.AddBox("alpha")
	b.AddBox("beta")
	gamma := b.AddBox("gamma")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.SetCredential(payer.VisitorAnthropic("github:ann"), visitorKey)
	ctx := context.Background()
	month := time.Now().UTC().Format("2006-01")
	report := func(scope string) {
		t.Helper()
		body := `{"capabilities":[{"name":"inference","broker":"lobby","scope":[` + scope + `]},{"name":"feedback","broker":"lobby","scope":["agent","passive"]}],` +
			`"listing":{"published":true,"title":"Alpha","line":"Answers questions about the repo"},` +
			`"spend":{"month":"` + month + `","usd":4.37,"runs":12,"unpriced":1,"byPrincipal":[` +
			`{"principal":"github:ann","usd":3.12,"runs":8,"unpriced":0},{"principal":"github:bob","usd":1.25,"runs":3,"unpriced":0},{"principal":null,"usd":0,"runs":1,"unpriced":1}]}}`
		if r := b.Do("POST", protocol.RouteDeclaration, alpha, []byte(body), nil); r.StatusCode != 200 {
			t.Fatalf("report: %d %s", r.StatusCode, r.Body)
		}
	}
	// Measured spend: ann's turns through her grant, and the box's own.
	report(`"agent","decide"`)
	annValue, ann, err := grant.Issue(ctx, b.Server.Store, "alpha", "github:ann", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const annCalls, sharedCalls = 18, 2
	for i := range annCalls + sharedCalls {
		h := http.Header{"Content-Type": {"application/json"}}
		want := "visitor github:ann"
		if i < annCalls {
			h.Set(protocol.HeaderGrant, annValue)
		} else {
			want = "shared"
		}
		if r := b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(brokertest.MessagesBody), h); r.StatusCode != 200 || r.Header.Get(protocol.HeaderPayer) != want {
			t.Fatalf("call %d = %d paid by %q, want 200 by %q: %s", i, r.StatusCode, r.Header.Get(protocol.HeaderPayer), want, r.Body)
		}
	}
	brokertest.Usage(t, b.Server.Store, "alpha", spend.Month(time.Now()), annCalls+sharedCalls)
	for _, bg := range []store.Budget{{Box: "alpha", Limit: 25_000_000}, {Box: "alpha", Principal: "github:ann", Limit: 5_000_000}} {
		bg.UpdatedAt = time.Now()
		if err := b.Server.Store.SetBudget(ctx, bg); err != nil {
			t.Fatal(err)
		}
	}
	_, dee, err := grant.Issue(ctx, b.Server.Store, "alpha", "github:dee", 15*time.Minute, time.Now().Add(-5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Store.RevokeGrant(ctx, dee.ID, time.Now().Add(-2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Then a report taking agent away, and a call it refuses.
	report(`"decide"`)
	if r := b.Do("POST", protocol.RouteDeclaration, gamma, []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":[]}],"listing":{"published":false,"title":"Gamma","line":"Not listed yet"}}`), nil); r.StatusCode != 200 {
		t.Fatalf("report: %d %s", r.StatusCode, r.Body)
	}
	b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(`{}`), nil)
	b.Do("POST", "/llm/anthropic/v1/messages", gamma, []byte(`{}`), nil)
	for i := range 3 {
		if _, err := b.Server.Store.AddFeedback(ctx, store.FeedbackBatch{Box: "alpha", At: time.Now(), Words: []string{"agent"}, Body: []byte(`{"entries":[` + string(rune('0'+i)) + `]}`)}, token.Hash(alpha), store.FeedbackBound{}); err != nil {
			t.Fatal(err)
		}
	}
	if *updateScreenshots {
		seedFleetNamed(t, b, fleetNames, 24)
	}
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	tctx, _ := startChromium(t, "the owner's page")
	text := func(what string) string {
		t.Helper()
		s, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatalf("browser: read %s: %v", what, err)
		}
		return s
	}
	// secretsSeen are values no page may ever hold; html checks the page
	// in the browser now against them.
	const secretValue = "sk_live_browser-secret-0123456789"
	secretsSeen := []string{b.AdminToken, alpha, gamma, sharedKey, visitorKey, annValue, secretValue}
	html := func(what string) string {
		t.Helper()
		h, err := chromedp.Run(tctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("browser: read %s's HTML: %v", what, err)
		}
		for _, v := range secretsSeen {
			if strings.Contains(h, v) {
				t.Errorf("%s's HTML holds a secret value (%d bytes, starting %.6q)", what, len(v), v)
			}
		}
		return h
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("browser: screenshot: %v", err)
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
		}
		dir := t.TempDir()
		if *updateScreenshots {
			dir = filepath.Join("..", "..", "..", "docs")
		}
		out := filepath.Join(dir, name)
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", out, len(png))
	}
	rows := func() []string {
		t.Helper()
		names, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.list tbody td:first-child a b")).map(e => e.textContent)`))
		if err != nil {
			t.Fatalf("browser: read the list's rows: %v", err)
		}
		return names
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
	if err := chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS("table.list")), chromedp.WaitVisible(chromedp.CSS("svg.chart rect.served"))); err != nil {
		t.Fatalf("browser: after signing in: %v; the page reads:\n%s", err, text("the page after signing in"))
	}
	overview := text("the boxes")
	html("the list of boxes")
	// The hourly chart is a strip: the table of boxes starts on the first
	// screen, under the chart, not below it.
	chartH, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`document.querySelector("svg.chart").getBoundingClientRect().height`))
	if err != nil {
		t.Fatalf("browser: measure the chart: %v", err)
	}
	tableTop, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`document.querySelector("table.list").getBoundingClientRect().top`))
	if err != nil {
		t.Fatalf("browser: measure the table: %v", err)
	}
	if chartH > 900/8 || tableTop > 900/2+100 {
		t.Errorf("the list's chart is %.0f px high and the table starts at %.0f px of a 900 px screen, want the chart under %d px and the table above %d px", chartH, tableTop, 900/8, 900/2+100)
	}
	cookies, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatalf("browser: read document.cookie: %v", err)
	}
	if !strings.Contains(signin, "Sign in with an admin token") {
		t.Errorf("the page before signing in reads %q, want the sign-in form", signin)
	}
	for _, want := range []string{"alpha", "beta", "gamma", "Alpha", "Gamma", "never reported", "Requests and refusals per hour", "requests,"} {
		if !strings.Contains(overview, want) {
			t.Errorf("the signed-in page lacks %q; it reads:\n%s", want, overview)
		}
	}
	if strings.Contains(cookies, "boxbroker_session") {
		t.Errorf("the page's script can read the session cookie (%q)", cookies)
	}
	if *updateScreenshots {
		shot("owner-page-list.png")
	}

	// The fleet's spend: reached from the bar at the top, by payer,
	// principal and model, with its CSV downloads.
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.Search(`//header//a[.="Spend"]`)),
		chromedp.WaitVisible(chromedp.ID("by-model")),
	); err != nil {
		t.Fatalf("browser: open the spend page: %v", err)
	}
	fleet := text("the spend page")
	html("the spend page")
	for _, want := range []string{"Spend in " + month, "By payer", "visitor", "github:ann", "By principal", "Charged", "By model", "claude-sonnet-4-5", "By box", "alpha", "Download as CSV"} {
		if !strings.Contains(fleet, want) {
			t.Errorf("the spend page lacks %q; it reads:\n%s", want, fleet)
		}
	}
	if err := chromedp.Do(tctx,
		chromedp.Navigate(b.AdminURL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("table.list")),
	); err != nil {
		t.Fatalf("browser: back to the list: %v", err)
	}

	// Sort by name, backwards, by its column's link; then filter by name.
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.Search(`//th/a[.="Box"]`)),
		chromedp.WaitVisible(chromedp.Search(`//th[contains(., "▼")]`)),
	); err != nil {
		t.Fatalf("browser: sort by name: %v", err)
	}
	if got := rows(); len(got) < 3 || got[0] == "alpha" {
		t.Errorf("the list sorted by name backwards starts %v, want alpha last", got)
	}
	if err := chromedp.Do(tctx,
		chromedp.SendKeys(chromedp.CSS(`form.filter input[name="q"]`), "alph"),
		chromedp.Submit(chromedp.CSS(`form.filter input[name="q"]`)),
		chromedp.WaitVisible(chromedp.Search(`//a[.="clear"]`)),
	); err != nil {
		t.Fatalf("browser: filter by name: %v", err)
	}
	if got := rows(); fmt.Sprint(got) != "[alpha]" {
		t.Errorf("the list filtered by alph = %v, want [alpha]", got)
	}

	// alpha's page: its card, and pause and resume it.
	pause := chromedp.Search(`//button[contains(., "Pause the box")]`)
	resume := chromedp.Search(`//button[contains(., "Resume the box")]`)
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.CSS(`table.list a[href="/ui/boxes/alpha"]`)),
		chromedp.WaitVisible(pause),
	); err != nil {
		t.Fatalf("browser: open alpha's page: %v", err)
	}
	card := text("alpha's page")
	for _, want := range []string{
		"inference: decide", "agent, passive", "github:ann", "$3.12", "$4.37",
		"3 batches kept", "does not list agent in its scope (it lists decide)",
		"measured over 20 calls", "differs", "of $25.00", "1 current of 2 issued", "Request log", "refusals, last 7 days, grouped",
	} {
		if !strings.Contains(strings.ToLower(card), strings.ToLower(want)) {
			t.Errorf("alpha's page lacks %q; it reads:\n%s", want, card)
		}
	}
	if err := chromedp.Do(tctx, chromedp.Click(pause), chromedp.WaitVisible(resume)); err != nil {
		t.Fatalf("browser: pause alpha: %v", err)
	}
	if bx, err := b.Server.Store.Box(ctx, "alpha"); err != nil || !bx.Paused {
		t.Errorf("alpha after pressing Pause in the browser = paused %v, %v, want paused", bx.Paused, err)
	}
	if err := chromedp.Do(tctx, chromedp.Click(resume), chromedp.WaitVisible(pause)); err != nil {
		t.Fatalf("browser: resume alpha: %v", err)
	}

	// Issue a grant from the page; its value is on the next page only.
	if err := chromedp.Do(tctx,
		chromedp.SendKeys(chromedp.ID("grant-principal"), "github:cat"),
		chromedp.SetValue(chromedp.ID("grant-ttl"), "30m"),
		chromedp.Submit(chromedp.ID("grant-principal")),
		chromedp.WaitVisible(chromedp.ID("grant-value")),
	); err != nil {
		t.Fatalf("browser: issue a grant: %v; the page reads:\n%s", err, text("the page after issuing"))
	}
	granted := text("the issued grant's page")
	value, err := chromedp.Run(tctx, chromedp.Text(chromedp.ID("grant-value")))
	if err != nil {
		t.Fatalf("browser: read the grant's value: %v", err)
	}
	value = strings.TrimSpace(value)
	cat, err := b.Server.Store.GrantByHash(ctx, token.Hash(value))
	if err != nil || cat.Box != "alpha" || cat.Principal != "github:cat" || cat.ExpiresAt.Sub(cat.CreatedAt) != 30*time.Minute {
		t.Fatalf("the grant the page showed = %+v, %v, want github:cat's on alpha for 30m", cat, err)
	}
	for _, want := range []string{"Copy it now", "only time", "github:cat holds no credential"} {
		if !strings.Contains(granted, want) {
			t.Errorf("the issued grant's page lacks %q; it reads:\n%s", want, granted)
		}
	}
	secretsSeen = append(secretsSeen, value)

	// Back on the box's page the value is gone; revoke the grant there.
	revoke := chromedp.CSS("#grant-" + cat.ID + " button")
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.Search(`//main/p/a[contains(., "alpha")]`)),
		chromedp.WaitVisible(revoke),
	); err != nil {
		t.Fatalf("browser: back to alpha's page: %v", err)
	}
	html("alpha's page after issuing a grant")
	if err := chromedp.Do(tctx,
		chromedp.Click(revoke),
		chromedp.WaitNotPresent(revoke),
	); err != nil {
		t.Fatalf("browser: revoke the grant: %v", err)
	}
	if got, err := b.Server.Store.GrantByHash(ctx, cat.Hash); err != nil || got.RevokedAt.IsZero() {
		t.Errorf("grant after pressing Revoke = revoked at %v, %v, want revoked", got.RevokedAt, err)
	}
	if got, err := b.Server.Store.GrantByHash(ctx, ann.Hash); err != nil || !got.RevokedAt.IsZero() {
		t.Errorf("ann's grant after revoking cat's = revoked at %v, %v, want standing", got.RevokedAt, err)
	}

	// Set a secret: typed into a password field, never shown again; alpha
	// does not declare it, and the page says so.
	if err := chromedp.Do(tctx,
		chromedp.SendKeys(chromedp.ID("secret-name"), "STRIPE"),
		chromedp.SendKeys(chromedp.ID("secret-host"), "https://api.stripe.com"),
		chromedp.SendKeys(chromedp.ID("secret-value"), secretValue),
		chromedp.Submit(chromedp.ID("secret-value")),
		chromedp.WaitVisible(chromedp.ID("secrets-extra")),
	); err != nil {
		t.Fatalf("browser: set a secret: %v; the page reads:\n%s", err, text("the page after setting a secret"))
	}
	if sec, err := b.Server.Store.Secret(ctx, "alpha", "STRIPE"); err != nil || sec.Host != "https://api.stripe.com" {
		t.Errorf("alpha's secret STRIPE after the form = %+v, %v, want it for https://api.stripe.com", sec, err)
	}
	html("alpha's page after setting a secret")

	// Set a budget of $30 for the box.
	if err := chromedp.Do(tctx,
		chromedp.SetValue(chromedp.ID("budget-usd"), "30"),
		chromedp.Submit(chromedp.ID("budget-usd")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	); err != nil {
		t.Fatalf("browser: set a budget: %v", err)
	}
	if err := chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS("#spend svg.chart line.limit")), chromedp.WaitVisible(chromedp.CSS("#spend svg.chart rect.spent"))); err != nil {
		t.Fatalf("browser: alpha's spend picture has no budget line or no spend: %v", err)
	}
	after := text("alpha's page after setting a budget")
	for _, want := range []string{"github:cat", "revoked", "github:ann", "current", "measured over 20 calls", "of $30.00", "$5.00", "Held but not declared: STRIPE", "set the box's monthly budget to $30",
		"Spend per day this month", "priced calls this month", "against its budget of $30.00"} {
		if !strings.Contains(after, want) {
			t.Errorf("alpha's page after setting a budget lacks %q; it reads:\n%s", want, after)
		}
	}
	html("alpha's page after setting a budget")
	if *updateScreenshots {
		// A box of the fleet, with a week of traffic and a spent budget.
		if err := chromedp.Do(tctx, chromedp.Navigate(b.AdminURL+"/ui/boxes/"+fleetNames[0]), chromedp.WaitVisible(chromedp.ID("blocked"))); err != nil {
			t.Fatalf("browser: open %s's page: %v", fleetNames[0], err)
		}
	}
	shot("owner-page-box.png")

	// Enrol a box: its token is shown once, and on no page after.
	if err := chromedp.Do(tctx,
		chromedp.Navigate(b.AdminURL+"/ui/enrol"),
		chromedp.SendKeys(chromedp.ID("box-name"), "delta"),
		chromedp.Click(chromedp.ID("enrol")),
		chromedp.WaitVisible(chromedp.ID("box-token")),
	); err != nil {
		t.Fatalf("browser: enrol a box: %v", err)
	}
	tok, err := chromedp.Run(tctx, chromedp.Text(chromedp.ID("box-token")))
	if err != nil {
		t.Fatalf("browser: read the token: %v", err)
	}
	tok = strings.TrimSpace(tok)
	if bx, err := b.Server.Store.BoxByTokenHash(ctx, token.Hash(tok)); err != nil || bx.Name != "delta" {
		t.Fatalf("the token the page showed is box %q's (%v), want delta's", bx.Name, err)
	}
	secretsSeen = append(secretsSeen, tok)
	for _, path := range []string{"/ui/boxes/delta", "/ui/"} {
		if err := chromedp.Do(tctx, chromedp.Navigate(b.AdminURL+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			t.Fatalf("browser: open %s: %v", path, err)
		}
		html(path + " after enrolling delta")
	}
}
