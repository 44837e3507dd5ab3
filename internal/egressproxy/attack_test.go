package egressproxy_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// tunnelRequest opens an allowed tunnel for tok and sends raw (an
// HTTP/1.1 request) in it; it returns the answer's status and body.
func tunnelRequest(t *testing.T, f *fixture, tok, raw string) (int, string) {
	t.Helper()
	resp, body, c := connect(t, f, f.host, basic(tok))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %d %s", resp.StatusCode, body)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: f.caPool, NextProtos: []string{"http/1.1"}})
	if _, err := io.WriteString(tc, raw); err != nil {
		t.Fatal(err)
	}
	ans, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(ans.Body)
	return ans.StatusCode, string(b)
}

// TestProxy_AnotherBoxsTokenInTheTunnelIsRefused: box A's tunnel cannot
// carry box B's token to spend B's secret, nor send B's token anywhere.
func TestProxy_AnotherBoxsTokenInTheTunnelIsRefused(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddBox("other")
	f.b.SetSecret("other", "API", "https://"+f.host, "other_value_0123456789")
	f.b.Report(other, brokertest.Entry("egress", "API"))
	status, body := tunnelRequest(t, f, f.token, "GET /v1/x HTTP/1.1\r\nHost: "+f.host+"\r\nAuthorization: Bearer "+other+"\r\nConnection: close\r\n\r\n")
	if status != 403 || !strings.Contains(body, "two different tokens") {
		t.Errorf("box A's tunnel with box B's token = %d %s, want 403 (two different tokens)", status, body)
	}
	if seen := f.up.all(); seen != "" {
		t.Errorf("the host received a request:\n%s", seen)
	}
}

// TestProxy_TokenInBase64NeverReachesTheHost: a box's client, handed
// its token as the key, writes it in base64 where the broker swaps
// nothing: Elasticsearch's ApiKey (base64 of id:key), Docker's
// X-Registry-Auth (base64url of a JSON document), a query parameter or a
// path segment. In a tunnel the box is known by its Proxy-Authorization,
// so the request is the box's whatever it carries: the broker refuses it
// (400, the form it does not swap), and the host never receives the
// token in any alignment of either alphabet.
func TestProxy_TokenInBase64NeverReachesTheHost(t *testing.T) {
	f := newFixture(t)
	std := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	raw := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct{ name, target, header string }{
		{"Elasticsearch's ApiKey", "/x", "Authorization: ApiKey " + std("VuaCfGcBCdbkQm-e5aOx:"+f.token)},
		{"Docker's X-Registry-Auth", "/x", "X-Registry-Auth: " + raw(`{"username":"u","password":"`+f.token+`"}`)},
		{"another alignment", "/x", "X-Key: " + std("ab"+f.token)},
		{"Basic credentials without their padding", "/x", "Authorization: Basic " + base64.RawStdEncoding.EncodeToString([]byte(unpadded(f.token)))},
		{"the query", "/x?auth=" + url.QueryEscape(std("u:"+f.token)), ""},
		{"the path", "/keys/" + raw("."+f.token), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head := "GET " + tt.target + " HTTP/1.1\r\nHost: " + f.host + "\r\n"
			if tt.header != "" {
				head += tt.header + "\r\n"
			}
			status, body := tunnelRequest(t, f, f.token, head+"Connection: close\r\n\r\n")
			if status != http.StatusBadRequest || !strings.Contains(body, "does not swap") {
				t.Errorf("status %d %s, want 400 saying the token is in a form the broker does not swap", status, body)
			}
		})
	}
	if seen := f.up.all(); seen != "" {
		t.Errorf("the host received a request:\n%s", seen)
	}
}

// unpadded is Basic credentials holding tok whose base64 is padded, so
// that without its padding it is no Basic a decoder takes.
func unpadded(tok string) string {
	cred := "u:" + tok
	for len(cred)%3 == 0 {
		cred = "u" + cred
	}
	return cred
}

// TestProxy_PathCannotClimbOutOfTheBase: a dot segment in a tunnel's
// request is refused by egress as on /egress/NAME, so a secret pinned
// under a path prefix is never sent above it.
func TestProxy_PathCannotClimbOutOfTheBase(t *testing.T) {
	f := newFixture(t)
	f.b.SetSecret("shop", "API", "https://"+f.host+"/v1", secretValue)
	f.b.Sync()
	for _, path := range []string{"/v1/../admin", "/v1/%2e%2e/admin", "/v1/..;/admin"} {
		status, body := tunnelRequest(t, f, f.token, "GET "+path+" HTTP/1.1\r\nHost: "+f.host+"\r\nAuthorization: Bearer "+f.token+"\r\nConnection: close\r\n\r\n")
		if status != 400 {
			t.Errorf("GET %s in the tunnel = %d %s, want 400", path, status, body)
		}
	}
	if status, body := tunnelRequest(t, f, f.token, "GET /admin HTTP/1.1\r\nHost: "+f.host+"\r\nConnection: close\r\n\r\n"); status != 403 {
		t.Errorf("GET /admin, outside the base /v1 = %d %s, want 403", status, body)
	}
	if seen := f.up.all(); seen != "" {
		t.Errorf("the host received a request:\n%s", seen)
	}
}

// TestProxy_BoxRateBoundHolds: requests through the proxy count against
// the box's rate bound as /egress/NAME ones do: past the burst, a 429
// with Retry-After, and the host is not reached.
func TestProxy_BoxRateBoundHolds(t *testing.T) {
	f := newFixtureConfig(t, nil, func(c *server.Config) { c.BoxRate, c.BoxBurst = 0.001, 4 }) // the fixture's report and the tunnel's CONNECT take one each
	c := f.client(t, f.token, f.caPool, false)
	statuses := getStatuses(t, c, "https://"+f.host+"/v1/x", 3)
	if statuses[2] != 429 {
		t.Errorf("statuses %v, want the third refused 429 (rate 0.001/s, burst 4, one taken by the report and one by the CONNECT)", statuses)
	}
	if n := strings.Count(f.up.all(), "GET /v1/x"); n != 2 {
		t.Errorf("the host received %d requests, want 2", n)
	}
}

// TestProxy_PassthroughHeldToTheBoxsBounds: a passthrough tunnel is not
// served by the broker's handler, yet the box's rate bound holds for it
// as for a request (one tunnel, one request): a box cannot get round its
// bounds by opening tunnels.
func TestProxy_PassthroughHeldToTheBoxsBounds(t *testing.T) {
	f := newFixtureConfig(t, nil, func(c *server.Config) { c.BoxRate, c.BoxBurst = 0.001, 3 }) // the fixture's report takes one
	roots := x509.NewCertPool()
	roots.AddCert(f.passCert)
	var refused int
	for i := range 3 {
		c := f.client(t, f.token, roots, false)
		c.Transport.(*http.Transport).DisableKeepAlives = true // a tunnel a request
		resp, err := c.Get("https://" + f.passHost + "/")
		if err != nil {
			if !strings.Contains(err.Error(), "Too Many Requests") {
				t.Fatalf("tunnel %d: %v, want a 429 refusal of the CONNECT", i, err)
			}
			refused++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if refused != 1 {
		t.Errorf("%d of 3 passthrough tunnels refused, want the third (rate 0.001/s, burst 3, one taken by the report)", refused)
	}
}

// getStatuses GETs url n times through c, one after another, and returns
// their statuses; a 429 without Retry-After fails the test.
func getStatuses(t *testing.T, c *http.Client, url string, n int) []int {
	t.Helper()
	var statuses []int
	for range n {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	return statuses
}
