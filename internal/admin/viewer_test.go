package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// routePath is a route's pattern's path with a value in each wildcard.
func routePath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	values := map[string]string{"{name}": "alpha", "{secret}": "GITHUB", "{kind}": "vault", "{entry}": "anthropic",
		"{principal}": "github:ann", "{scope}": "hosts", "{id}": "x1"}
	for w, v := range values {
		path = strings.ReplaceAll(path, w, v)
	}
	return method, path
}

// adminRows counts the audit log's rows of actions (capability admin).
func adminRows(t *testing.T, s store.Store) int {
	t.Helper()
	rows, err := s.ListAudit(context.Background(), store.AuditQuery{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range rows {
		if e.Capability == store.ActorAdmin {
			n++
		}
	}
	return n
}

// TestAdmin_ViewerTokenReadsEveryRouteAndWritesNone walks every admin
// route the Server serves: a viewer's admin token reads each GET route
// (and HEAD of it) as an operator's does, and is refused (403, naming
// its role and what to use instead) on every other method before
// anything is done, with no audit row; an operator's token is refused on
// none. GET /api/proxy/ca, the one read that writes (it makes the CA the
// store lacks), makes nothing for a viewer. It runs on SQLite, and on
// PostgreSQL where one can be had.
func TestAdmin_ViewerTokenReadsEveryRouteAndWritesNone(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { viewerWalk(t, brokertest.New(t, brokertest.Options{})) })
	t.Run("postgres", func(t *testing.T) {
		b, _ := brokertest.Replicas(t, brokertest.Options{})
		viewerWalk(t, b)
	})
}

// viewerWalk is TestAdmin_ViewerTokenReadsEveryRouteAndWritesNone on b.
func viewerWalk(t *testing.T, b *brokertest.Broker) {
	ctx := context.Background()
	boxToken := b.AddBox("alpha")
	viewer, vt, err := operator.MintRole(ctx, b.Server.Store, "dashboard", store.AdminViewer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	before := adminRows(t, b.Server.Store)

	routes := b.Server.Admin.Routes()
	reads := map[string]int{} // a GET route's path → the viewer's status
	writes := 0
	for _, rt := range routes {
		if rt.Open {
			continue
		}
		method, path := routePath(rt.Pattern)
		if method == http.MethodGet {
			resp := b.Admin(method, path, viewer, nil)
			reads[path] = resp.StatusCode
			if path == "/api/proxy/ca" {
				// No CA yet, and a viewer makes none.
				if msg := refusal(t, "GET /api/proxy/ca with a viewer's token and no CA", resp, http.StatusForbidden); !strings.Contains(msg, "viewer") {
					t.Errorf("GET /api/proxy/ca with a viewer's token and no CA: %q, want it to say a viewer makes none", msg)
				}
				continue
			}
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				t.Errorf("%s with a viewer's token = %d %s, want it read", rt.Pattern, resp.StatusCode, resp.Body)
			}
			if head := b.Admin(http.MethodHead, path, viewer, nil); head.StatusCode != resp.StatusCode {
				t.Errorf("HEAD %s with a viewer's token = %d, want %d as GET", path, head.StatusCode, resp.StatusCode)
			}
			continue
		}
		writes++
		resp := b.Admin(method, path, viewer, map[string]any{})
		msg := refusal(t, rt.Pattern+" with a viewer's token", resp, http.StatusForbidden)
		typ, _ := brokertest.Refusal(resp.Body)
		if typ != protocol.TypePermission || !strings.Contains(msg, vt.ID+" is a viewer's") || !strings.Contains(msg, "operator's admin token") {
			t.Errorf("%s with a viewer's token = %s %q, want a permission_error naming its role and the operator's token to use", rt.Pattern, typ, msg)
		}
	}
	if writes < 20 || len(reads) < 20 {
		t.Fatalf("walked %d write and %d read routes, want every admin route", writes, len(reads))
	}
	if after := adminRows(t, b.Server.Store); after != before {
		t.Errorf("the viewer's requests wrote %d audit rows of actions, want none", after-before)
	}
	if _, err := b.Server.Store.Box(ctx, "alpha"); err != nil {
		t.Errorf("Box(alpha) after the viewer's requests = %v, want it kept", err)
	}
	if resp := b.Do("POST", protocol.RouteDeclaration, boxToken, []byte(`{"capabilities":[]}`), nil); resp.StatusCode != 200 {
		t.Errorf("the box's own token after the viewer's requests = %d, want 200 (not rotated)", resp.StatusCode)
	}

	// An operator's token reads the same (and makes the CA), and is
	// refused no write.
	for _, rt := range routes {
		if method, path := routePath(rt.Pattern); !rt.Open && method == http.MethodGet {
			if resp := b.Admin(method, path, b.AdminToken, nil); path != "/api/proxy/ca" && resp.StatusCode != reads[path] {
				t.Errorf("%s: an operator's token = %d, a viewer's %d, want the same", rt.Pattern, resp.StatusCode, reads[path])
			}
		}
	}
	if resp := b.Admin("GET", "/api/proxy/ca", viewer, nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(resp.Body), "BEGIN CERTIFICATE") {
		t.Errorf("GET /api/proxy/ca with a viewer's token once the CA is made = %d %s, want its certificates", resp.StatusCode, resp.Body)
	}
	for _, rt := range routes {
		if method, path := routePath(rt.Pattern); !rt.Open && method != http.MethodGet {
			resp := b.Admin(method, path, b.AdminToken, map[string]any{})
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				t.Errorf("%s with an operator's token = %d %s, want it not refused for its role", rt.Pattern, resp.StatusCode, resp.Body)
			}
		}
	}
}
