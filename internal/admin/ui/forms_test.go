package ui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/sso"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// formsPage is a page with every form served (proposals and single
// sign-on on), over a store holding the box alpha, and the sessions and
// cookies of an admin token's session, of a single sign-on viewer's and
// of a viewer's admin token's.
func formsPage(t *testing.T) formsFixture {
	t.Helper()
	var f formsFixture
	var u *Page
	f.s, f.st, u, f.adminSess, f.adminCookie = testPage(t, nil, func(st store.Store) Config {
		approvals, err := approval.New(approval.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		return Config{Approvals: approvals, SSO: sso.Config{Issuer: "http://127.0.0.1:1", ClientID: "broker",
			RedirectURL: "http://127.0.0.1:2" + sso.CallbackPath, Viewers: []string{"*"}}}
	})
	var err error
	if f.viewerSess, err = u.newSession(""); err != nil {
		t.Fatal(err)
	}
	f.viewerSess.Subject, f.viewerSess.Issuer, f.viewerSess.Name, f.viewerSess.Role = "v1", u.sso.Issuer(), "vera", sso.Viewer
	f.viewerSess.Claim = "email" // what a sign-in keeps: the role claim its role rests on
	f.viewerCookie = sessionCookie(t, u, f.viewerSess)
	// A viewer's admin token's session: its cookie names the token alone,
	// and the role is the token's, read at each request.
	_, vt, err := operator.MintRole(t.Context(), f.st, "viewer", store.AdminViewer, u.cfg.Now())
	if err != nil {
		t.Fatal(err)
	}
	if f.viewerTokenSess, err = u.newSession(vt.ID); err != nil {
		t.Fatal(err)
	}
	f.viewerTokenCookie = sessionCookie(t, u, f.viewerTokenSess)
	return f
}

// formsFixture is what formsPage makes.
type formsFixture struct {
	s                         *admin.Server
	st                        store.Store
	adminSess, viewerSess     *Session
	adminCookie, viewerCookie *http.Cookie
	viewerTokenSess           *Session
	viewerTokenCookie         *http.Cookie
}

// testPage is a page made with cfg(st) over a new store st (as wrap
// wraps it, when not nil) holding the box alpha, with an admin token's
// session and its cookie.
func testPage(t *testing.T, wrap func(store.Store) store.Store, cfg func(store.Store) Config) (s *admin.Server, st store.Store, u *Page, sess *Session, cookie *http.Cookie) {
	t.Helper()
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st = sq
	if wrap != nil {
		st = wrap(sq)
	}
	k, _, err := secrets.Load(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err = admin.New(admin.Config{Store: st, Keyring: k, Hosts: []string{"example.com"}}) // httptest.NewRequest's Host
	if err != nil {
		t.Fatal(err)
	}
	if u, err = New(s, cfg(st)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Operator().AddBox(t.Context(), operator.NewBox{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	_, tok, err := operator.MintRole(t.Context(), sq, "t", store.AdminOperator, s.Config().Now())
	if err != nil {
		t.Fatal(err)
	}
	if sess, err = u.newSession(tok.ID); err != nil {
		t.Fatal(err)
	}
	return s, sq, u, sess, sessionCookie(t, u, sess)
}

// sessionCookie is the cookie u sets for sess.
func sessionCookie(t *testing.T, u *Page, sess *Session) *http.Cookie {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := u.startSession(rec, httptest.NewRequest("GET", "/ui/", nil), sess); err != nil {
		t.Fatal(err)
	}
	return rec.Result().Cookies()[0]
}

// formPath is fm's route with each wildcard named.
func formPath(fm form) string {
	_, path, _ := strings.Cut(fm.pattern, " ")
	return strings.NewReplacer("{name}", "alpha", "{secret}", "STRIPE", "{id}", "p1", "{entry}", "team-b").Replace(path)
}

// TestUI_EveryFormIsChecked posts every form of the table, each field
// filled, without a session, without the session's CSRF secret, with
// another session's, from another origin, and as a viewer (a single
// sign-on viewer, or a session of a viewer's admin token): each is
// refused before its action runs, and nothing is done or audited.
func TestUI_EveryFormIsChecked(t *testing.T) {
	f := formsPage(t)
	s, st, adminSess, viewerSess, adminCookie, viewerCookie := f.s, f.st, f.adminSess, f.viewerSess, f.adminCookie, f.viewerCookie
	tests := []struct {
		name   string
		cookie *http.Cookie
		csrf   string
		origin string
		status int
		want   string
	}{
		{"no session", nil, adminSess.CSRF, "", http.StatusUnauthorized, "You are not signed in"},
		{"no csrf", adminCookie, "", "", http.StatusForbidden, "This form did not come from the owner"},
		{"another session's csrf", adminCookie, viewerSess.CSRF, "", http.StatusForbidden, "This form did not come from the owner"},
		{"other origin", adminCookie, adminSess.CSRF, "https://evil.example", http.StatusForbidden, "This form did not come from the owner"},
		{"viewer", viewerCookie, viewerSess.CSRF, "", http.StatusForbidden, "a viewer sees the owner"},
		{"viewer's token", f.viewerTokenCookie, f.viewerTokenSess.CSRF, "", http.StatusForbidden, "a viewer sees the owner"},
	}
	ctx := context.Background()
	before, err := st.ListAudit(ctx, store.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, fm := range forms {
		for _, tt := range tests {
			if strings.HasPrefix(tt.name, "viewer") && fm.pattern == "POST /ui/signout" {
				continue // a viewer may sign out
			}
			form := url.Values{}
			for _, f := range fm.fields {
				form.Set(f, "alpha")
			}
			if tt.csrf != "" {
				form.Set("csrf", tt.csrf)
			}
			req := httptest.NewRequest("POST", formPath(fm), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.cookie != nil {
				req.AddCookie(tt.cookie)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("%s (%s) = %d, want %d saying %q", fm.pattern, tt.name, rec.Code, tt.status, tt.want)
			}
		}
	}
	if boxes, err := st.ListBoxes(ctx); err != nil || len(boxes) != 1 {
		t.Errorf("boxes after refused posts = %v, %v, want alpha alone", boxes, err)
	}
	if ended, err := st.SessionEnded(ctx, adminSess.ID); err != nil || ended {
		t.Errorf("the session after refused sign-outs: ended %v, %v, want it to stand", ended, err)
	}
	if after, err := st.ListAudit(ctx, store.AuditQuery{Limit: 100}); err != nil || len(after) != len(before) {
		t.Errorf("audit entries after refused posts = %d, %v, want %d (none added)", len(after), err, len(before))
	}
}

// TestUI_FormNotices checks the table's notices: every done a form goes
// back with names a notice of the page it goes back to, given by one
// form.
func TestUI_FormNotices(t *testing.T) {
	given := map[string]int{}
	for _, fm := range forms {
		if fm.done == "" {
			if fm.notice != "" {
				t.Errorf("%s has a notice and no done", fm.pattern)
			}
			continue
		}
		if notice(fm.back, fm.done) == "" {
			t.Errorf("%s goes back to %s?done=%s, which shows no notice", fm.pattern, fm.back, fm.done)
		}
		if fm.notice != "" {
			given[fm.back+"?done="+fm.done]++
		}
	}
	for k, n := range given {
		if n != 1 {
			t.Errorf("%s's notice is given by %d forms, want 1", k, n)
		}
	}
}
