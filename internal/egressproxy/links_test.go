package egressproxy_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// serveLinks answers a path <prefix>/links/<what> with links at the host
// that answers, as an API paging or moving a resource does, each
// repeating the key it received in the query:
//
//   - start: a 302 to the absolute URL of landed, with a Link (absolute,
//     absolute path and relative) and a Content-Location;
//   - abs, path, rel: a 302 to landed, by its absolute URL, its absolute
//     path, or the reference relative to the request;
//   - away: a 302 to /elsewhere/links/landed, another path at the host;
//   - landed: 200 "landed <path> key=<key>".
func serveLinks(w http.ResponseWriter, r *http.Request) {
	prefix, what, _ := strings.Cut(r.URL.Path, "/links/")
	key := r.URL.Query().Get("key")
	origin := "https://" + r.Host
	landed := prefix + "/links/landed?key=" + key
	switch what {
	case "start":
		w.Header().Set("Link", "<"+origin+prefix+"/links/page?n=2>; rel=\"next\", <"+prefix+"/links/first>; rel=\"first\", <page?n=9>; rel=\"last\"")
		w.Header().Set("Content-Location", origin+prefix+"/links/start")
		http.Redirect(w, r, origin+landed, http.StatusFound)
	case "abs":
		http.Redirect(w, r, origin+landed, http.StatusFound)
	case "path":
		http.Redirect(w, r, landed, http.StatusFound)
	case "rel":
		w.Header().Set("Location", "landed?key="+key)
		w.WriteHeader(http.StatusFound)
	case "away":
		http.Redirect(w, r, "/elsewhere/links/landed?key="+key, http.StatusFound)
	case "landed":
		io.WriteString(w, "landed "+r.URL.Path+" key="+key)
	default:
		http.NotFound(w, r)
	}
}

// TestProxy_LinksNameTheHostInTheTunnel: a client in a tunnel asked the
// secret's host itself (https://example.com:<port>/...), so links to
// that host come back as the host sent them, the value in them replaced
// by the box's token: the client resolves them against the host, and
// following them comes back through the proxy to the path the host
// meant. Pointed at /egress/NAME/... as on the broker's own route, the
// client would ask the host for /egress/NAME/... instead. Checked with
// a secret at the host's root and one with a base path, over HTTP/1.1
// and HTTP/2, for an absolute Location, an absolute path, a relative
// reference, another path at the host, and Link and Content-Location.
func TestProxy_LinksNameTheHostInTheTunnel(t *testing.T) {
	f := newFixture(t)
	f.b.SetSecret("shop", "BASED", "https://"+f.host+"/v2", secretValue)
	f.b.Report(f.token, brokertest.Entry("egress", "API", "BASED"))
	origin := "https://" + f.host
	for _, h2 := range []bool{false, true} {
		c := f.client(t, f.token, f.caPool, h2)
		noFollow := *c
		noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		for _, prefix := range []string{"", "/v2"} {
			resp, err := noFollow.Get(origin + prefix + "/links/start?key=" + f.token)
			if err != nil {
				t.Fatalf("h2=%v %q: GET start: %v", h2, prefix, err)
			}
			resp.Body.Close()
			want := map[string]string{
				"Location":         origin + prefix + "/links/landed?key=" + f.token,
				"Content-Location": origin + prefix + "/links/start",
				"Link":             "<" + origin + prefix + "/links/page?n=2>; rel=\"next\", <" + prefix + "/links/first>; rel=\"first\", <page?n=9>; rel=\"last\"",
			}
			for k, w := range want {
				if g := resp.Header.Get(k); g != w {
					t.Errorf("h2=%v: GET %s/links/start: %s = %q, want %q, as the host sent it with the box's token", h2, prefix, k, g, w)
				}
			}

			tests := []struct {
				what, landed string
			}{
				{"start", prefix + "/links/landed"},
				{"abs", prefix + "/links/landed"},
				{"path", prefix + "/links/landed"},
				{"rel", prefix + "/links/landed"},
				{"away", "/elsewhere/links/landed"},
			}
			for _, tt := range tests {
				req, _ := http.NewRequest(http.MethodGet, origin+prefix+"/links/"+tt.what+"?key="+f.token, nil)
				status, body := send(t, c, req)
				if w := "landed " + tt.landed + " key=" + f.token; status != http.StatusOK || string(body) != w {
					t.Errorf("h2=%v: following %s/links/%s = %d %q, want 200 %q", h2, prefix, tt.what, status, body, w)
				}
			}
		}
	}
	if seen := f.up.all(); strings.Contains(seen, "/egress/") {
		t.Errorf("the host was asked for a path under /egress/:\n%s", seen)
	}
}
