package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_ViewerTokenSignsInAViewer: a session signed in with a viewer's
// admin token is a viewer's, as a single sign-on viewer's is: it sees
// every page, and a form it posts (with its CSRF secret) is refused 403
// saying so, with nothing done. A session of an
// operator's token acts as before, and revoking the viewer's token ends
// its session.
func TestUI_ViewerTokenSignsInAViewer(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	b.AddBox("alpha")
	viewer, vt, err := operator.MintRole(ctx, b.Server.Store, "wallboard", store.AdminViewer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, viewer)
	for _, path := range []string{"/ui/", "/ui/boxes/alpha", "/ui/credentials", "/ui/proxy", "/ui/spend", "/ui/spend.csv", "/ui/audit.csv", "/ui/enrol"} {
		if p := visit(t, b, "GET", path, cookie, nil, nil); p.status != http.StatusOK {
			t.Errorf("GET %s signed in with a viewer's token = %d, want 200", path, p.status)
		}
	}
	csrf := csrfOf(t, visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil).body)
	pause := url.Values{"csrf": {csrf}, "set": {"paused"}, "value": {"true"}}
	p := visit(t, b, "POST", "/ui/boxes/alpha/settings", cookie, pause, nil)
	if p.status != http.StatusForbidden || !strings.Contains(p.body, vt.ID+", a viewer&#39;s") || !strings.Contains(p.body, "operator&#39;s admin token") {
		t.Errorf("POST settings signed in with a viewer's token = %d, want 403 naming the token as a viewer's:\n%s", p.status, p.body)
	}
	if p := visit(t, b, "POST", "/ui/boxes", cookie, url.Values{"csrf": {csrf}, "name": {"beta"}}, nil); p.status != http.StatusForbidden {
		t.Errorf("POST /ui/boxes signed in with a viewer's token = %d, want 403", p.status)
	}
	if box, err := b.Server.Store.Box(ctx, "alpha"); err != nil || box.Paused {
		t.Errorf("alpha after a viewer's post = %+v, %v, want it not paused", box, err)
	}
	if _, err := b.Server.Store.Box(ctx, "beta"); err == nil {
		t.Errorf("a viewer's post enrolled beta")
	}

	// An operator's token's session acts.
	opCookie := signIn(t, b, b.AdminToken)
	opCSRF := csrfOf(t, visit(t, b, "GET", "/ui/boxes/alpha", opCookie, nil, nil).body)
	pause.Set("csrf", opCSRF)
	if p := visit(t, b, "POST", "/ui/boxes/alpha/settings", opCookie, pause, nil); p.status != http.StatusSeeOther {
		t.Errorf("POST settings signed in with an operator's token = %d, want 303:\n%s", p.status, p.body)
	}
	if box, err := b.Server.Store.Box(ctx, "alpha"); err != nil || !box.Paused {
		t.Errorf("alpha after an operator's post = %+v, %v, want it paused", box, err)
	}

	// The viewer signs out, or its token's revocation ends its session.
	if err := b.Server.Store.DeleteAdminToken(ctx, vt.ID); err != nil {
		t.Fatal(err)
	}
	if p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil); p.status != http.StatusSeeOther {
		t.Errorf("GET a box's page after the viewer's token was revoked = %d, want 303 to the sign-in", p.status)
	}
}
