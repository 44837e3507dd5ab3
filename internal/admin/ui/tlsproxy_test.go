package ui_test

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/sso"
	"github.com/intentius/boxbroker/internal/sso/ssotest"
)

// tlsProxy plays a browser on https://name:port reaching the admin
// listener at plain http through a TLS-terminating proxy, which keeps
// the Host: the browser's URL is https (its cookie jar holds cookies
// for it), the listener sees plain http with r.TLS nil. A post carries
// the Origin a browser sends. It keeps every Set-Cookie the listener
// answered.
type tlsProxy struct {
	public   string // https://name:port, as the browser reaches it
	listener string // 127.0.0.1:port
	mu       sync.Mutex
	set      []string
}

func (p *tlsProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	if "https://"+req.URL.Host != p.public {
		return http.DefaultTransport.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	if req.Method == http.MethodPost {
		out.Header.Set("Origin", p.public)
	}
	out.Host = req.URL.Host
	out.URL.Scheme, out.URL.Host = "http", p.listener
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err == nil {
		p.mu.Lock()
		p.set = append(p.set, resp.Header.Values("Set-Cookie")...)
		p.mu.Unlock()
	}
	return resp, err
}

// cookies are the Set-Cookie values kept for the cookie name.
func (p *tlsProxy) cookies(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.set {
		if strings.HasPrefix(c, name+"=") {
			out = append(out, c)
		}
	}
	return out
}

// TestUI_CookiesBehindATLSProxyAreSecure: the owner's page reached at
// https://broker.example.com through a TLS-terminating proxy (the
// admin listener serving plain http behind it, as admin-api.md allows).
// The session cookie, whether signed in with an admin token or by single
// sign-on, and the sign-in flow's cookie are Secure: a browser never
// sends them to a plain-http request for the host (a URL typed or
// bookmarked as http://, a link from a page of the same site), where
// anyone on the network would read the operator's session.
func TestUI_CookiesBehindATLSProxyAreSecure(t *testing.T) {
	idp := ssotest.New(t, "boxbroker-test", "client-secret-0123456789")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "https://broker.example.com:" + fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.AdminHosts = []string{"broker.example.com"}
		c.SSO = sso.Config{Issuer: idp.URL, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
			RedirectURL: public + sso.CallbackPath, Operators: []string{"ops@example.com"}}
	}})
	hs := &http.Server{Handler: b.Server.Admin, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	secure := func(t *testing.T, p *tlsProxy, name string) {
		t.Helper()
		set := p.cookies(name)
		if len(set) == 0 {
			t.Fatalf("no %s cookie was set", name)
		}
		for _, c := range set {
			if _, attrs, _ := strings.Cut(c, ";"); !strings.Contains(attrs, " Secure") {
				t.Errorf("Set-Cookie: %s=…;%s\nwant Secure: the browser reached the page over https", name, attrs)
			}
		}
	}
	browserVia := func(t *testing.T) (*http.Client, *tlsProxy) {
		p := &tlsProxy{public: public, listener: ln.Addr().String()}
		c := browser(t)
		c.Transport = p
		return c, p
	}

	t.Run("admin token", func(t *testing.T) {
		c, p := browserVia(t)
		if pg := browse(t, c, public+"/ui/"); !strings.Contains(pg.body, `action="/ui/signin"`) {
			t.Fatalf("GET /ui/ through the proxy = %d, want the sign-in form:\n%s", pg.status, pg.body)
		}
		if pg := submit(t, c, public+"/ui/signin", url.Values{"token": {b.AdminToken}}); pg.status != http.StatusSeeOther {
			t.Fatalf("POST /ui/signin through the proxy = %d %s, want 303", pg.status, pg.body)
		}
		secure(t, p, ui.SessionCookie)
	})
	t.Run("single sign-on", func(t *testing.T) {
		idp.SignInAs("operator-1", email("ops@example.com"))
		c, p := browserVia(t)
		if pg := browse(t, c, public+sso.StartPath); pg.status != http.StatusOK || !strings.Contains(pg.body, "Signed in as ops@example.com") {
			t.Fatalf("single sign-on through the proxy ended with %d:\n%s", pg.status, pg.body)
		}
		secure(t, p, sso.FlowCookie)
		secure(t, p, ui.SessionCookie)
	})
}
