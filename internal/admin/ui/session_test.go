package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"

	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// TestUI_SessionExpires signs in, moves the clock past the session's
// length, and finds the session over.
func TestUI_SessionExpires(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _, err := secrets.Load(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC)
	s, err := admin.New(admin.Config{Store: st, Keyring: k, Now: func() time.Time { return now }, Hosts: []string{"example.com"}}) // httptest.NewRequest's Host
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(s, Config{SessionTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	token, _, err := operator.MintRole(t.Context(), st, "t", store.AdminOperator, now)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/ui/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	s.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("sign in = %d with %d cookies, want 303 and one", rec.Code, len(cookies))
	}
	get := func() string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/ui/", nil)
		req.AddCookie(cookies[0])
		s.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	if !strings.Contains(get(), "Sign out") {
		t.Fatalf("GET /ui/ just after signing in is not signed in")
	}
	now = now.Add(time.Hour)
	if strings.Contains(get(), "Sign out") {
		t.Errorf("GET /ui/ an hour into a one-hour session is still signed in")
	}
}
