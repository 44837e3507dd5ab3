package ui_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/sso"
	"github.com/intentius/boxbroker/internal/sso/ssotest"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// ssoBroker is a broker whose owner's page signs in with the stand-in
// provider idp: ops@example.com and the group "ops" are operators,
// view@example.com a viewer. base is its admin listener's URL, which the
// redirect URL names.
type ssoBroker struct {
	b    *brokertest.Broker
	idp  *ssotest.IdP
	base string
	// token is box alpha's.
	token string
}

func newSSOBroker(t *testing.T, claim string, operators, viewers []string) *ssoBroker {
	t.Helper()
	return newSSOBrokerAt(t, "127.0.0.1", claim, operators, viewers)
}

// newSSOBrokerAt is newSSOBroker whose page is reached by host (an IP
// address or localhost).
func newSSOBrokerAt(t *testing.T, host, claim string, operators, viewers []string) *ssoBroker {
	t.Helper()
	return newSSOBrokerOn(t, ssotest.New(t, "boxbroker-test", "client-secret-0123456789"), "", host, claim, operators, viewers)
}

// newSSOBrokerOn is newSSOBrokerAt signing in with idp, under the master
// key key ("" for one of its own).
func newSSOBrokerOn(t *testing.T, idp *ssotest.IdP, key, host, claim string, operators, viewers []string) *ssoBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + net.JoinHostPort(host, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.SSO = sso.Config{Issuer: idp.URL, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
			RedirectURL: base + sso.CallbackPath, RoleClaim: claim, Operators: operators, Viewers: viewers}
		if key != "" {
			c.MasterKey = key
		}
	}})
	hs := &http.Server{Handler: b.Server.Admin, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	tok := b.AddBox("alpha")
	return &ssoBroker{b: b, idp: idp, base: base, token: tok}
}

// browser is a client with a cookie jar that follows redirects, as a
// browser does.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

func browse(t *testing.T, c *http.Client, u string) page {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func submit(t *testing.T, c *http.Client, u string, form url.Values) page {
	t.Helper()
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := nc.PostForm(u, form)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// signInSSO signs in through the provider as sub with claims, following
// every redirect, and returns the browser and the callback's page.
func (s *ssoBroker) signInSSO(t *testing.T, sub string, claims map[string]any) (*http.Client, page) {
	t.Helper()
	s.idp.SignInAs(sub, claims)
	c := browser(t)
	if p := browse(t, c, s.base+"/ui/"); !strings.Contains(p.body, `href="/ui/sso/start"`) {
		t.Fatalf("the sign-in page has no single sign-on link:\n%s", p.body)
	}
	return c, browse(t, c, s.base+sso.StartPath)
}

func signedInAs(t *testing.T, s *ssoBroker, c *http.Client) page {
	t.Helper()
	p := browse(t, c, s.base+"/ui/boxes/alpha")
	if p.status != http.StatusOK || !strings.Contains(p.body, "Sign out") {
		t.Fatalf("GET /ui/boxes/alpha after signing in = %d, want the box's page:\n%s", p.status, p.body)
	}
	return p
}

func email(addr string) map[string]any {
	return map[string]any{"email": addr, "email_verified": true}
}

// TestSSO_ViewerSeesButCannotAct signs a viewer in: every page opens,
// every form that changes anything is refused with 403, and signing out
// still works.
func TestSSO_ViewerSeesButCannotAct(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, []string{"view@example.com"})
	c, cb := s.signInSSO(t, "viewer-1", email("view@example.com"))
	if cb.status != http.StatusOK || !strings.Contains(cb.body, "view@example.com, viewer") {
		t.Fatalf("callback = %d, want 200 naming the viewer:\n%s", cb.status, cb.body)
	}
	p := signedInAs(t, s, c)
	csrf := csrfOf(t, p.body)
	for _, path := range []string{"/ui/", "/ui/spend", "/ui/credentials", "/ui/proxy"} {
		if p := browse(t, c, s.base+path); p.status != http.StatusOK {
			t.Errorf("viewer GET %s = %d, want 200", path, p.status)
		}
	}
	tests := []struct {
		path string
		form url.Values
	}{
		{"/ui/boxes/alpha/settings", url.Values{"set": {"paused"}, "value": {"true"}}},
		{"/ui/boxes", url.Values{"name": {"beta"}}},
		{"/ui/boxes/alpha/rotate", url.Values{}},
		{"/ui/boxes/alpha/budget", url.Values{"usd": {"5"}}},
		{"/ui/boxes/alpha/remove", url.Values{"confirm": {"alpha"}}},
		{"/ui/proxy/ca/rotate", url.Values{"grace": {"0s"}, "confirm": {"rotate"}}},
	}
	for _, tt := range tests {
		tt.form.Set("csrf", csrf)
		p := submit(t, c, s.base+tt.path, tt.form)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "a viewer") {
			t.Errorf("viewer POST %s = %d, want 403 saying a viewer cannot act:\n%s", tt.path, p.status, p.body)
		}
	}
	ctx := context.Background()
	if b, err := s.b.Server.Store.Box(ctx, "alpha"); err != nil || b.Paused {
		t.Errorf("box alpha after the viewer's posts: %+v, %v; want it there and not paused", b, err)
	}
	if _, err := s.b.Server.Store.Box(ctx, "beta"); err == nil {
		t.Errorf("the viewer enrolled box beta")
	}
	if _, err := s.b.Server.Store.ProxyCA(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the egress proxy's CA after the viewer's visit and rotation: %v, want none made", err)
	}
	if p := submit(t, c, s.base+"/ui/signout", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Errorf("viewer POST /ui/signout = %d, want 303", p.status)
	}
	if p := browse(t, c, s.base+"/ui/boxes/alpha"); strings.Contains(p.body, "Sign out") {
		t.Errorf("the viewer's session stands after signing out")
	}
}

// TestSSO_OperatorActsAndAuditNamesThem signs an operator in (by group):
// the form works, and the audit row names the person.
func TestSSO_OperatorActsAndAuditNamesThem(t *testing.T) {
	s := newSSOBroker(t, "groups", []string{"ops"}, []string{"*"})
	claims := email("ops@example.com")
	claims["groups"] = []any{"staff", "ops"}
	c, _ := s.signInSSO(t, "operator-1", claims)
	csrf := csrfOf(t, signedInAs(t, s, c).body)
	if p := submit(t, c, s.base+"/ui/boxes/alpha/settings", url.Values{"csrf": {csrf}, "set": {"paused"}, "value": {"true"}}); p.status != http.StatusSeeOther {
		t.Fatalf("operator POST settings = %d, want 303:\n%s", p.status, p.body)
	}
	ctx := context.Background()
	if b, err := s.b.Server.Store.Box(ctx, "alpha"); err != nil || !b.Paused {
		t.Fatalf("box alpha after the operator paused it: %+v, %v", b, err)
	}
	entries, err := s.b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range entries {
		if e.Capability == store.ActorAdmin && strings.Contains(e.Message, "(by ops@example.com, operator)") {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit row names ops@example.com: %+v", entries)
	}
	// Someone in no operators' group is a viewer ("*"), named by their
	// subject: their email is not verified.
	c2, cb := s.signInSSO(t, "staff-1", map[string]any{"email": "staff@example.com", "groups": []any{"staff"}})
	if !strings.Contains(cb.body, "staff-1, viewer") {
		t.Fatalf("staff callback = %d, want a viewer:\n%s", cb.status, cb.body)
	}
	csrf = csrfOf(t, signedInAs(t, s, c2).body)
	if p := submit(t, c2, s.base+"/ui/boxes/alpha/settings", url.Values{"csrf": {csrf}, "set": {"paused"}, "value": {"false"}}); p.status != http.StatusForbidden {
		t.Errorf("viewer POST settings = %d, want 403", p.status)
	}
}

// TestSSO_RoleJudgedAgainOnEveryRequest: an operator's session, shown to
// a broker under the same master key and provider whose lists name the
// person a viewer only, is a viewer's there (its forms refused); shown to
// one whose lists name them not at all, it is no session. The role in the
// cookie is not trusted past the lists of the day.
func TestSSO_RoleJudgedAgainOnEveryRequest(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	idp := ssotest.New(t, "boxbroker-test", "client-secret-0123456789")
	first := newSSOBrokerOn(t, idp, key, "127.0.0.1", "email", []string{"ops@example.com"}, nil)
	c, cb := first.signInSSO(t, "operator-1", email("ops@example.com"))
	if !strings.Contains(cb.body, "ops@example.com, operator") {
		t.Fatalf("callback = %d, want an operator:\n%s", cb.status, cb.body)
	}
	signedInAs(t, first, c)

	demoted := newSSOBrokerOn(t, idp, key, "127.0.0.1", "email", []string{"other@example.com"}, []string{"ops@example.com"})
	csrf := csrfOf(t, signedInAs(t, demoted, c).body)
	p := submit(t, c, demoted.base+"/ui/boxes/alpha/settings", url.Values{"csrf": {csrf}, "set": {"paused"}, "value": {"true"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "a viewer") {
		t.Errorf("POST settings with the person now a viewer = %d, want 403 saying a viewer cannot act:\n%s", p.status, p.body)
	}
	if b, err := demoted.b.Server.Store.Box(context.Background(), "alpha"); err != nil || b.Paused {
		t.Errorf("box alpha after the demoted post: %+v, %v; want it not paused", b, err)
	}

	dropped := newSSOBrokerOn(t, idp, key, "127.0.0.1", "email", []string{"other@example.com"}, []string{"someone@example.com"})
	if p := browse(t, c, dropped.base+"/ui/boxes/alpha"); strings.Contains(p.body, "Sign out") {
		t.Errorf("the session stands at a broker whose lists name the person not at all:\n%s", p.body)
	}
}

// TestSSO_AdminTokenStillSignsIn: the admin token keeps working beside
// single sign-on, and may act.
func TestSSO_AdminTokenStillSignsIn(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, nil)
	cookie := signIn(t, s.b, s.b.AdminToken)
	p := visit(t, s.b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	if p := visit(t, s.b, "POST", "/ui/boxes/alpha/settings", cookie, url.Values{"csrf": {csrfOf(t, p.body)}, "set": {"paused"}, "value": {"true"}}, nil); p.status != http.StatusSeeOther {
		t.Errorf("admin token POST settings = %d, want 303", p.status)
	}
}

// TestSSO_PKCEVerifierSent checks the authorization request carried an
// S256 challenge and the token request the verifier that matches it.
func TestSSO_PKCEVerifierSent(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, nil)
	c, _ := s.signInSSO(t, "operator-1", email("ops@example.com"))
	signedInAs(t, s, c)
	ch, vs := s.idp.Challenges(), s.idp.Verifiers()
	if len(ch) != 1 || len(vs) != 1 {
		t.Fatalf("challenges %q, verifiers %d; want one of each", ch, len(vs))
	}
	sum := sha256.Sum256([]byte(vs[0]))
	if want := "S256:" + base64.RawURLEncoding.EncodeToString(sum[:]); ch[0] != want || len(vs[0]) < 43 {
		t.Errorf("challenge %q, verifier of %d bytes; want %q from a verifier of at least 43", ch[0], len(vs[0]), want)
	}
}

// TestSSO_NoRoleRefused: a person in neither list is refused at the
// callback and gets no session; so is an unverified email.
func TestSSO_NoRoleRefused(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, []string{"view@example.com"})
	for _, claims := range []map[string]any{email("stranger@example.com"), {"email": "ops@example.com", "email_verified": false}} {
		c, cb := s.signInSSO(t, "x", claims)
		if cb.status != http.StatusForbidden {
			t.Errorf("callback for %v = %d, want 403:\n%s", claims, cb.status, cb.body)
		}
		if p := browse(t, c, s.base+"/ui/boxes/alpha"); strings.Contains(p.body, "Sign out") {
			t.Errorf("%v got a session", claims)
		}
	}
}

// TestSSO_BadStateRefused: a callback whose state is not the one this
// browser's flow began with is refused, as is one with no flow begun
// (a code sent to another browser), and neither makes a session.
func TestSSO_BadStateRefused(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, nil)
	s.idp.SignInAs("operator-1", email("ops@example.com"))
	c := browser(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	start := browse(t, c, s.base+sso.StartPath)
	if start.status != http.StatusSeeOther {
		t.Fatalf("GET start = %d, want 303", start.status)
	}
	for _, ck := range start.header.Values("Set-Cookie") {
		if strings.HasPrefix(ck, sso.FlowCookie+"=") && (!strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Lax")) {
			t.Errorf("flow cookie %q, want HttpOnly and SameSite=Lax", ck)
		}
	}
	at := browse(t, c, start.header.Get("Location"))
	back, err := url.Parse(at.header.Get("Location"))
	if err != nil || back.Query().Get("code") == "" {
		t.Fatalf("the provider sent back %q", at.header.Get("Location"))
	}
	q := back.Query()
	good := q.Get("state")
	q.Set("state", "forged"+good[6:])
	back.RawQuery = q.Encode()
	if p := browse(t, c, back.String()); p.status != http.StatusBadRequest {
		t.Errorf("callback with a forged state = %d, want 400:\n%s", p.status, p.body)
	}
	// The same code and the right state in a browser that began no flow.
	q.Set("state", good)
	back.RawQuery = q.Encode()
	if p := browse(t, browser(t), back.String()); p.status != http.StatusBadRequest {
		t.Errorf("callback in another browser = %d, want 400", p.status)
	}
	c.CheckRedirect = nil
	if p := browse(t, c, s.base+"/ui/boxes/alpha"); strings.Contains(p.body, "Sign out") {
		t.Errorf("a refused callback made a session")
	}
	if len(s.idp.Verifiers()) != 0 {
		t.Errorf("a refused callback exchanged the code")
	}
}

// TestSSO_BadTokenRefused: an ID token with another nonce, issuer or
// audience, or expired, is refused and makes no session.
func TestSSO_BadTokenRefused(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, nil)
	tests := []struct {
		name   string
		tamper func(map[string]any)
	}{
		{"nonce", func(c map[string]any) { c["nonce"] = "another-flows-nonce" }},
		{"no nonce", func(c map[string]any) { delete(c, "nonce") }},
		{"issuer", func(c map[string]any) { c["iss"] = "https://evil.example.com" }},
		{"audience", func(c map[string]any) { c["aud"] = "another-client" }},
		{"expired", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }},
		{"long subject", func(c map[string]any) { c["sub"] = strings.Repeat("s", 5000) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.idp.Tamper(tt.tamper)
			defer s.idp.Tamper(nil)
			c, cb := s.signInSSO(t, "operator-1", email("ops@example.com"))
			if cb.status != http.StatusUnauthorized {
				t.Errorf("callback with a token of bad %s = %d, want 401:\n%s", tt.name, cb.status, cb.body)
			}
			for _, ck := range c.Jar.Cookies(mustURL(t, s.base+"/ui/")) {
				if ck.Name == ui.SessionCookie {
					t.Errorf("a token of bad %s set a session cookie", tt.name)
				}
			}
		})
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSSO_DecisionNamesThePerson: a proposal an operator signed in with
// single sign-on approves or denies on the page names them as who
// decided it, as the audit row does: a decision made through the page
// never names "page:" and no one.
func TestSSO_DecisionNamesThePerson(t *testing.T) {
	s := newSSOBroker(t, "email", []string{"ops@example.com"}, nil)
	ctx := context.Background()
	if err := s.b.Server.Approvals.SetAsk(ctx, "alpha", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	open := func(host string) string {
		v, err := s.b.Server.Approvals.Refused(ctx, approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalHost,
			Method: http.MethodConnect, Host: host, Reason: "no secret"}, TokenHash: token.Hash(s.token)})
		if err != nil || v.Proposal.ID == "" {
			t.Fatalf("open a proposal for %s: %+v, %v", host, v, err)
		}
		return v.Proposal.ID
	}
	c, _ := s.signInSSO(t, "operator-1", email("ops@example.com"))
	csrf := csrfOf(t, signedInAs(t, s, c).body)
	approved, denied := open("one.example:443"), open("two.example:443")
	if p := submit(t, c, s.base+"/ui/proposals/"+approved+"/approve", url.Values{"csrf": {csrf}, "for": {"1h"}}); p.status != http.StatusSeeOther {
		t.Fatalf("approve = %d:\n%s", p.status, p.body)
	}
	if p := submit(t, c, s.base+"/ui/proposals/"+denied+"/deny", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("deny = %d:\n%s", p.status, p.body)
	}
	for _, id := range []string{approved, denied} {
		p, err := s.b.Server.Store.Proposal(ctx, id, time.Now())
		if err != nil || p.DecidedBy != "page:ops@example.com" {
			t.Errorf("proposal %s decided by %q (%v), want %q", id, p.DecidedBy, err, "page:ops@example.com")
		}
	}
}

// TestSSO_UnverifiedEmailNamesNoActor: an operator by group who typed
// another person's address as their email, which the provider has not
// verified, acts on the page: neither the audit row nor the decision
// names that person; both name the operator by their username.
func TestSSO_UnverifiedEmailNamesNoActor(t *testing.T) {
	s := newSSOBroker(t, "groups", []string{"ops"}, nil)
	ctx := context.Background()
	if err := s.b.Server.Approvals.SetAsk(ctx, "alpha", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	v, err := s.b.Server.Approvals.Refused(ctx, approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalHost,
		Method: http.MethodConnect, Host: "one.example:443", Reason: "no secret"}, TokenHash: token.Hash(s.token)})
	if err != nil || v.Proposal.ID == "" {
		t.Fatalf("open a proposal: %+v, %v", v, err)
	}
	c, _ := s.signInSSO(t, "mallory-1", map[string]any{"email": "boss@example.com", "email_verified": false,
		"preferred_username": "mallory", "groups": []any{"ops"}})
	csrf := csrfOf(t, signedInAs(t, s, c).body)
	if p := submit(t, c, s.base+"/ui/boxes/alpha/settings", url.Values{"csrf": {csrf}, "set": {"paused"}, "value": {"true"}}); p.status != http.StatusSeeOther {
		t.Fatalf("operator POST settings = %d", p.status)
	}
	if p := submit(t, c, s.base+"/ui/proposals/"+v.Proposal.ID+"/approve", url.Values{"csrf": {csrf}, "for": {"1h"}}); p.status != http.StatusSeeOther {
		t.Fatalf("approve = %d", p.status)
	}
	entries, err := s.b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, e := range entries {
		if strings.Contains(e.Message, "boss@example.com") {
			t.Errorf("an audit row names the unverified email: %q", e.Message)
		}
		if e.Capability == store.ActorAdmin && strings.Contains(e.Message, "(by mallory, operator)") {
			named++
		}
	}
	if named != 2 {
		t.Errorf("%d audit rows name mallory, want 2 (the pause and the approval)", named)
	}
	if p, err := s.b.Server.Store.Proposal(ctx, v.Proposal.ID, time.Now()); err != nil || p.DecidedBy != "page:mallory" {
		t.Errorf("decided by %q (%v), want page:mallory", p.DecidedBy, err)
	}
}
