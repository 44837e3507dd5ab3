package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestUI_SignedOutCookieIsRefused signs in, keeps the session cookie,
// signs out, and replays the kept cookie: the server ended the session,
// so the old cookie opens no page and posts no form, while a new sign-in
// still works.
func TestUI_SignedOutCookieIsRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	kept := signIn(t, b, b.AdminToken)
	p := visit(t, b, "GET", "/ui/boxes/alpha", kept, nil, nil)
	if p.status != 200 {
		t.Fatalf("GET /ui/boxes/alpha signed in = %d, want 200", p.status)
	}
	csrf := csrfOf(t, p.body)
	if p := visit(t, b, "POST", "/ui/signout", kept, url.Values{"csrf": {csrf}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("POST /ui/signout = %d %s, want 303", p.status, p.body)
	}

	if p := visit(t, b, "GET", "/ui/", kept, nil, nil); strings.Contains(p.body, "Sign out") || !strings.Contains(p.body, "Admin token") {
		t.Errorf("GET /ui/ with the signed-out cookie = %d, want the sign-in form:\n%s", p.status, p.body)
	}
	if p := visit(t, b, "GET", "/ui/boxes/alpha", kept, nil, nil); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui/boxes/alpha with the signed-out cookie = %d to %q, want 303 to the sign-in form", p.status, p.header.Get("Location"))
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/settings", kept, url.Values{"csrf": {csrf}, "paused": {"on"}}, nil); p.status != http.StatusUnauthorized {
		t.Errorf("POST /ui/boxes/alpha/settings with the signed-out cookie = %d, want 401", p.status)
	}

	// A new session is a new ID: signing in again opens the pages.
	again := signIn(t, b, b.AdminToken)
	if p := visit(t, b, "GET", "/ui/boxes/alpha", again, nil, nil); p.status != 200 {
		t.Errorf("GET /ui/boxes/alpha after signing in again = %d, want 200", p.status)
	}
}
