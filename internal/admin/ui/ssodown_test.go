package ui

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/sso"
	"github.com/intentius/boxbroker/internal/sso/ssotest"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// ssoPage is an admin Server with the owner's page signing in with the
// provider at issuer, its clock clock, its log (at INFO, serve's
// default) written to logs.
func ssoPage(t *testing.T, issuer string, clock *clocktest.Clock, logs *bytes.Buffer) *admin.Server {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, _, err := secrets.Load(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := admin.New(admin.Config{Store: st, Keyring: k, Now: clock.Now, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Hosts: []string{"example.com"}}) // httptest.NewRequest's Host
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(s, Config{SSO: sso.Config{Issuer: issuer, ClientID: "boxbroker",
		RedirectURL: "http://127.0.0.1:8788" + sso.CallbackPath, Operators: []string{"ops@example.com"}}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// failuresLogged counts the owner's page's failures in logs.
func failuresLogged(logs *bytes.Buffer) int {
	return strings.Count(logs.String(), `"msg":"owner's page failed"`)
}

// TestSSO_FailingProviderIsNotAskedOnEveryStart: while the identity
// provider's discovery fails, a client sends GET /ui/sso/start as fast
// as it can: any client that reaches the listener, or a page the
// operator visits (an <img> at http://127.0.0.1:8788/ui/sso/start
// needs no cookie, and an IP address is a Host the listener answers).
// The provider is asked again only once the failure is 5 s old, and only
// an asking is logged: neither the provider nor the log takes a request
// and a line for each of the client's.
func TestSSO_FailingProviderIsNotAskedOnEveryStart(t *testing.T) {
	var asked atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "the provider is down", http.StatusBadGateway)
	}))
	t.Cleanup(idp.Close)
	clock := clocktest.New(time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC))
	var logs bytes.Buffer
	s := ssoPage(t, idp.URL, clock, &logs)
	start := func() {
		t.Helper()
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", sso.StartPath, nil))
		if rec.Code != http.StatusBadGateway {
			t.Fatalf("GET %s while the provider is down = %d, want 502", sso.StartPath, rec.Code)
		}
	}
	logged := func() int { return failuresLogged(&logs) }

	// A client that goes away during a start fails only its own: the
	// provider was not the one that failed.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", sso.StartPath, nil).WithContext(gone))
	asked.Store(0)
	logs.Reset()

	for range 50 {
		start()
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("50 starts at one moment asked the provider %d times, want once", n)
	}
	if n := logged(); n != 1 {
		t.Errorf("50 starts at one moment logged %d failures, want the one asking", n)
	}
	clock.Advance(5 * time.Second)
	start()
	if n := asked.Load(); n != 2 {
		t.Errorf("a start 5 s after the failure asked the provider %d times in all, want twice", n)
	}
	if n := logged(); n != 2 {
		t.Errorf("a start 5 s after the failure: %d failures logged in all, want two", n)
	}
}

// TestSSO_CallbackWithNoFlowLogsNothing: a client sends the callback
// as fast as it can with no flow begun, or a forged state, or the
// provider's error: anyone who reaches the admin listener, or a page the
// operator visits, by an <img> at http://127.0.0.1:8788/ui/sso/callback
// (its own flow cookie, SameSite=Lax, is not sent with it). Each is
// refused, 400, as a wrong admin token is at the sign-in form: none is
// an ERROR line, which would fill the operator's log.
func TestSSO_CallbackWithNoFlowLogsNothing(t *testing.T) {
	idp := ssotest.New(t, "boxbroker", "client-secret-0123456789")
	var logs bytes.Buffer
	s := ssoPage(t, idp.URL, clocktest.New(time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC)), &logs)
	for i := range 50 {
		target := sso.CallbackPath + []string{"", "?state=forged&code=c", "?error=access_denied"}[i%3]
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("GET %s with no flow begun = %d, want 400", target, rec.Code)
		}
	}
	if n := failuresLogged(&logs); n != 0 {
		t.Errorf("50 callbacks with no flow begun logged %d failures, want none", n)
	}
}
