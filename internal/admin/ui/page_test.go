package ui_test

import (
	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"

	"context"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/token"
)

// page is one answer from the owner's page.
type page struct {
	status int
	header http.Header
	body   string
}

// noRedirect is a client that shows redirects rather than following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// visit sends method path to the admin listener with cookie (none when
// empty), form as the body (none when nil) and extra headers.
func visit(t *testing.T, b *brokertest.Broker, method, path, cookie string, form url.Values, header map[string]string) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.AdminURL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: cookie})
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(rb)}
}

// signIn signs in with token and returns the session cookie's value.
func signIn(t *testing.T, b *brokertest.Broker, token string) string {
	t.Helper()
	p := visit(t, b, "POST", "/ui/signin", "", url.Values{"token": {token}}, nil)
	if p.status != http.StatusSeeOther {
		t.Fatalf("POST /ui/signin = %d %s, want 303", p.status, p.body)
	}
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == ui.SessionCookie {
			return c.Value
		}
	}
	t.Fatalf("POST /ui/signin set no %s cookie", ui.SessionCookie)
	return ""
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field in the page")
	}
	return m[1]
}

func TestUI_SignIn(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	if p := visit(t, b, "GET", "/ui/", "", nil, nil); p.status != 200 || !strings.Contains(p.body, "Admin token") {
		t.Fatalf("GET /ui/ signed out = %d, want the sign-in form:\n%s", p.status, p.body)
	} else if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("GET /ui/ Content-Security-Policy = %q, want frame-ancestors 'none'", csp)
	}

	const wrong = "bba_definitely-not-an-admin-token"
	p := visit(t, b, "POST", "/ui/signin", "", url.Values{"token": {wrong}}, nil)
	if p.status != 401 || !strings.Contains(p.body, "not an admin token") || strings.Contains(p.body, wrong) {
		t.Errorf("POST /ui/signin with a wrong token = %d, want 401 saying so without echoing it:\n%s", p.status, p.body)
	}
	if len(p.header.Values("Set-Cookie")) != 0 {
		t.Errorf("a refused sign-in set a cookie: %v", p.header.Values("Set-Cookie"))
	}
	box := b.AddBox("alpha")
	if p := visit(t, b, "POST", "/ui/signin", "", url.Values{"token": {box}}, nil); p.status != 401 {
		t.Errorf("POST /ui/signin with a box's token = %d, want 401", p.status)
	}
	if p := visit(t, b, "POST", "/ui/signin", "", url.Values{"token": {b.AdminToken}}, map[string]string{"Origin": "https://evil.example"}); p.status != 403 {
		t.Errorf("POST /ui/signin from another origin = %d, want 403", p.status)
	}

	p = visit(t, b, "POST", "/ui/signin", "", url.Values{"token": {b.AdminToken}}, nil)
	if p.status != 303 || p.header.Get("Location") != "/ui/" {
		t.Fatalf("POST /ui/signin = %d to %q, want 303 to /ui/", p.status, p.header.Get("Location"))
	}
	set := strings.Join(p.header.Values("Set-Cookie"), "\n")
	for _, want := range []string{ui.SessionCookie + "=", "HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(set, want) {
			t.Errorf("session cookie %q lacks %s", set, want)
		}
	}
	if strings.Contains(set, b.AdminToken) || strings.Contains(set, token.Hash(b.AdminToken)) || strings.Contains(set, strings.TrimPrefix(b.AdminToken, token.AdminPrefix)) {
		t.Errorf("session cookie holds the admin token or its hash: %s", set)
	}
}

func TestUI_ShowsBoxes(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	body := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["decide"]}],` +
		`"listing":{"published":true,"title":"Alpha <b>box</b>","line":"It answers questions"},` +
		`"spend":{"month":"` + monthNow() + `","usd":1.25,"runs":2,"unpriced":0,"byPrincipal":[{"principal":"github:ann","usd":1.25,"runs":2,"unpriced":0}]}}`
	if r := b.Do("POST", protocol.RouteDeclaration, tok, []byte(body), nil); r.StatusCode != 200 {
		t.Fatalf("report = %d %s", r.StatusCode, r.Body)
	}
	if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(`{}`), nil); r.StatusCode != 403 {
		t.Fatalf("messages without agent = %d", r.StatusCode)
	}
	if err := b.Server.Audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, b.AdminToken)
	p := visit(t, b, "GET", "/ui/", cookie, nil, nil)
	if p.status != 200 {
		t.Fatalf("GET /ui/ signed in = %d %s", p.status, p.body)
	}
	for _, want := range []string{"alpha", "shared", "Alpha &lt;b&gt;box&lt;/b&gt;", `class="warn">1</span>`, "ok</span>"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("GET /ui/ lacks %q", want)
		}
	}
	p = visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	for _, want := range []string{
		"alpha", "inference", "decide", "shared", "Alpha &lt;b&gt;box&lt;/b&gt;", "It answers questions",
		"github:ann", "$1.25", "does not list agent", "0 batches kept", "listed",
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("GET /ui/boxes/alpha lacks %q", want)
		}
	}
	if strings.Contains(p.body, "<b>box</b>") {
		t.Errorf("GET /ui/ put a box's listing title in the page unescaped")
	}
	if strings.Contains(p.body, tok) || strings.Contains(p.body, b.AdminToken) {
		t.Errorf("GET /ui/ shows a token")
	}

	bp := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	if bp.status != 200 || !strings.Contains(bp.body, "/llm/anthropic/v1/messages") || !strings.Contains(bp.body, "Pause the box") {
		t.Errorf("GET /ui/boxes/alpha = %d, want the box with its recent requests and settings:\n%s", bp.status, bp.body)
	}
	if p := visit(t, b, "GET", "/ui/boxes/nobox", cookie, nil, nil); p.status != 404 {
		t.Errorf("GET /ui/boxes/nobox = %d, want 404", p.status)
	}
	if p := visit(t, b, "GET", "/ui/boxes/alpha", "", nil, nil); p.status != 303 {
		t.Errorf("GET /ui/boxes/alpha signed out = %d, want 303 to sign in", p.status)
	}
}

func monthNow() string { return timeNow().UTC().Format("2006-01") }

// TestUI_CSRF is a form posted from elsewhere: without the session's
// secret, or from another origin, it changes nothing.
func TestUI_CSRF(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	cookie := signIn(t, b, b.AdminToken)
	csrf := csrfOf(t, visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil).body)
	form := func(secret string) url.Values {
		return url.Values{"csrf": {secret}, "set": {"paused"}, "value": {"true"}}
	}
	tests := []struct {
		name   string
		cookie string
		form   url.Values
		header map[string]string
		status int
	}{
		{"no csrf", cookie, url.Values{"set": {"paused"}, "value": {"true"}}, nil, 403},
		{"wrong csrf", cookie, form(strings.Repeat("0", len(csrf))), nil, 403},
		{"other origin", cookie, form(csrf), map[string]string{"Origin": "https://evil.example"}, 403},
		{"no session", "", form(csrf), nil, 401},
		{"forged cookie", "AAAA" + cookie[4:], form(csrf), nil, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := visit(t, b, "POST", "/ui/boxes/alpha/settings", tt.cookie, tt.form, tt.header)
			if p.status != tt.status {
				t.Errorf("POST settings (%s) = %d, want %d", tt.name, p.status, tt.status)
			}
			if bx, _ := b.Server.Store.Box(context.Background(), "alpha"); bx.Paused {
				t.Fatalf("POST settings (%s) paused the box", tt.name)
			}
		})
	}
	p := visit(t, b, "POST", "/ui/boxes/alpha/settings", cookie, form(csrf), map[string]string{"Origin": b.AdminURL})
	if p.status != 303 {
		t.Fatalf("POST settings with the secret from this origin = %d %s, want 303", p.status, p.body)
	}
	if bx, _ := b.Server.Store.Box(context.Background(), "alpha"); !bx.Paused {
		t.Errorf("POST settings with the secret did not pause the box")
	}
}

func TestUI_RevokedTokenEndsSession(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	token, tok, err := operator.MintRole(ctx, b.Server.Store, "browser", store.AdminOperator, timeNow())
	if err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, token)
	if p := visit(t, b, "GET", "/ui/", cookie, nil, nil); !strings.Contains(p.body, "Sign out") {
		t.Fatalf("GET /ui/ with a fresh session is not signed in:\n%s", p.body)
	}
	if err := b.Server.Store.DeleteAdminToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	p := visit(t, b, "GET", "/ui/", cookie, nil, nil)
	if strings.Contains(p.body, "Sign out") || !strings.Contains(p.body, "Admin token") {
		t.Errorf("GET /ui/ after revoking the token = signed in, want the sign-in form")
	}
}

func TestUI_SignOut(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	cookie := signIn(t, b, b.AdminToken)
	csrf := csrfOf(t, visit(t, b, "GET", "/ui/", cookie, nil, nil).body)
	p := visit(t, b, "POST", "/ui/signout", cookie, url.Values{"csrf": {csrf}}, nil)
	if p.status != 303 || !strings.Contains(strings.Join(p.header.Values("Set-Cookie"), ";"), "Max-Age=0") {
		t.Errorf("POST /ui/signout = %d %v, want 303 clearing the cookie", p.status, p.header.Values("Set-Cookie"))
	}
}

// TestUI_Extension adds a section and a form route as a later part would.
func TestUI_Extension(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	var posted []string
	b.Server.Page.AddBoxSection(ui.BoxSection{Title: "Notes", Render: func(ctx context.Context, box string, f ui.FormContext) (template.HTML, error) {
		return template.HTML(`<form method="post" action="/ui/boxes/` + box + `/notes/n1/clear">` + string(f.CSRFField()) + `<button>Clear n1</button></form>`), nil
	}})
	b.Server.Page.HandleUI("POST /ui/boxes/{name}/notes/{id}/clear", func(w http.ResponseWriter, r *http.Request, s *ui.Session) error {
		posted = append(posted, r.PathValue("name")+"/"+r.PathValue("id"))
		http.Redirect(w, r, "/ui/boxes/"+r.PathValue("name"), http.StatusSeeOther)
		return nil
	})
	cookie := signIn(t, b, b.AdminToken)
	p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	if !strings.Contains(p.body, "<h2>Notes</h2>") || !strings.Contains(p.body, "Clear n1") {
		t.Fatalf("box page lacks the added section:\n%s", p.body)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/notes/n1/clear", cookie, url.Values{}, nil); p.status != 403 || len(posted) != 0 {
		t.Errorf("added route without csrf = %d (posted %v), want 403 and not run", p.status, posted)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/notes/n1/clear", cookie, url.Values{"csrf": {csrfOf(t, p.body)}}, nil); p.status != 303 || len(posted) != 1 || posted[0] != "alpha/n1" {
		t.Errorf("added route with csrf = %d (posted %v), want 303 and run once", p.status, posted)
	}
}

func timeNow() time.Time { return time.Now() }

// TestUI_RevokeAnotherBoxsGrant is a revoke through one box's page of a
// grant issued for another: refused, and the grant stands.
func TestUI_RevokeAnotherBoxsGrant(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	b.AddBox("beta")
	ctx := context.Background()
	_, g, err := grant.Issue(ctx, b.Server.Store, "beta", "github:ann", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, b.AdminToken)
	csrf := csrfOf(t, visit(t, b, "GET", "/ui/boxes/beta", cookie, nil, nil).body)
	if p := visit(t, b, "POST", "/ui/boxes/alpha/grants/"+g.ID+"/revoke", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 404 {
		t.Errorf("revoke beta's grant through alpha = %d, want 404", p.status)
	}
	if got, _ := b.Server.Store.GrantByHash(ctx, g.Hash); !got.RevokedAt.IsZero() {
		t.Fatalf("beta's grant was revoked through alpha's page")
	}
	if p := visit(t, b, "POST", "/ui/boxes/beta/grants/"+g.ID+"/revoke", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 303 {
		t.Errorf("revoke beta's grant through beta = %d, want 303", p.status)
	}
	if got, _ := b.Server.Store.GrantByHash(ctx, g.Hash); got.RevokedAt.IsZero() {
		t.Errorf("beta's grant stands after revoking it through its page")
	}
}
