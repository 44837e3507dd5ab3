package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/sso"
)

// TestUI_SessionCookieOpensNoAPIRoute: the owner's page's session, held
// by a browser (or read out of one), is no admin token: sent to the admin
// API as a cookie or as the bearer, every route is 401 and nothing is
// changed. The page's session never reaches the API's routes, which take
// only an admin token.
func TestUI_SessionCookieOpensNoAPIRoute(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, nil)
	b := s.b
	tokenSession := signIn(t, b, b.AdminToken)
	c, _ := s.signInSSO(t, "operator-1", email("ops@example.com"))
	signedInAs(t, s, c)
	var ssoSession string
	for _, ck := range c.Jar.Cookies(mustURL(t, s.base+"/ui/")) {
		if ck.Name == ui.SessionCookie {
			ssoSession = ck.Value
		}
	}
	if ssoSession == "" {
		t.Fatal("the single sign-on browser holds no session cookie")
	}
	for _, rt := range b.Server.Admin.Routes() {
		if rt.Open {
			continue
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = strings.NewReplacer("{name}", "alpha", "{id}", "anthropic", "{secret}", "GITHUB", "{kind}", "vault", "{principal}", "github:ann",
			"{scope}", "hosts", "{entry}", "team-b").Replace(path)
		for name, session := range map[string]string{"token's session": tokenSession, "single sign-on session": ssoSession} {
			if p := visit(t, b, method, path, session, nil, nil); p.status != http.StatusUnauthorized {
				t.Errorf("%s %s with the %s as a cookie = %d, want 401", method, path, name, p.status)
			}
			if p := visit(t, b, method, path, "", nil, map[string]string{"Authorization": "Bearer " + session}); p.status != http.StatusUnauthorized {
				t.Errorf("%s %s with the %s as the bearer = %d, want 401", method, path, name, p.status)
			}
		}
	}
	if _, err := b.Server.Store.Box(t.Context(), "alpha"); err != nil {
		t.Errorf("box alpha after the refused calls: %v", err)
	}
}

// TestUI_FlowCookieIsNoSession: an unauthenticated client gets a value
// sealed under the master key from /ui/sso/start (the flow cookie) and
// shows it as the session cookie; and shows a session cookie as the flow
// cookie at the callback. Each is sealed for its own purpose: no session
// is opened, and the callback is refused without asking the provider.
func TestUI_FlowCookieIsNoSession(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, []string{"*"})
	s.idp.SignInAs("viewer-1", email("anyone@example.com"))
	start := browse(t, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, s.base+sso.StartPath)
	var flow string
	for _, ck := range (&http.Response{Header: start.header}).Cookies() {
		if ck.Name == sso.FlowCookie {
			flow = ck.Value
		}
	}
	if flow == "" {
		t.Fatalf("GET %s = %d set no flow cookie", sso.StartPath, start.status)
	}
	if p := visit(t, s.b, "GET", "/ui/", flow, nil, nil); p.status != http.StatusOK || !strings.Contains(p.body, "Admin token") || strings.Contains(p.body, "Sign out") {
		t.Errorf("GET /ui/ with the flow cookie as the session = %d, want the sign-in form:\n%s", p.status, p.body)
	}
	for _, path := range []string{"/ui/boxes/alpha", "/ui/spend.csv", "/ui/audit.csv"} {
		if p := visit(t, s.b, "GET", path, flow, nil, nil); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" {
			t.Errorf("GET %s with the flow cookie as the session = %d, want 303 to the sign-in form:\n%s", path, p.status, p.body)
		}
	}
	if p := visit(t, s.b, "POST", "/ui/boxes/alpha/settings", flow, url.Values{"set": {"paused"}, "value": {"true"}}, nil); p.status != http.StatusUnauthorized {
		t.Errorf("POST settings with the flow cookie as the session = %d, want 401", p.status)
	}

	// A session's cookie shown as the flow cookie at the callback.
	session := signIn(t, s.b, s.b.AdminToken)
	req, err := http.NewRequest("GET", s.base+sso.CallbackPath+"?state=x&code=y", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: sso.FlowCookie, Value: session})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("callback with a session cookie as the flow cookie = %d, want 400", resp.StatusCode)
	}
	if len(s.idp.Verifiers()) != 0 {
		t.Errorf("the callback asked the provider for a token")
	}
	if b, err := s.b.Server.Store.Box(t.Context(), "alpha"); err != nil || b.Paused {
		t.Errorf("box alpha after the refused post: %+v, %v; want it not paused", b, err)
	}
}
