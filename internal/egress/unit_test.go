package egress

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

func TestJoinPath(t *testing.T) {
	withPrefix, _ := protocol.ParseSecretHost("https://api.example.com/v1")
	bare, _ := protocol.ParseSecretHost("https://api.example.com")
	tests := []struct {
		base          *url.URL
		tail          string
		path, rawPath string
		refused       bool
	}{
		{withPrefix, "", "/v1", "/v1", false},
		{bare, "", "/", "/", false},
		{withPrefix, "/", "/v1/", "/v1/", false},
		{withPrefix, "/charges/ch_1", "/v1/charges/ch_1", "/v1/charges/ch_1", false},
		{withPrefix, "//charges///x//", "/v1/charges/x/", "/v1/charges/x/", false},
		{withPrefix, "/group%2Fproject/issues", "/v1/group/project/issues", "/v1/group%2Fproject/issues", false},
		{withPrefix, `/a\b`, `/v1/a\b`, "/v1/a%5Cb", false},
		{withPrefix, "/a%20b;c=d@e", "/v1/a b;c=d@e", "/v1/a%20b;c=d@e", false},
		{withPrefix, "/..", "", "", true},
		{withPrefix, "/a/../b", "", "", true},
		{withPrefix, "/%2e%2E/b", "", "", true},
		{withPrefix, "/a%2F..%2Fb", "", "", true},
		{withPrefix, `/a\..\b`, "", "", true},
		{withPrefix, "/.", "", "", true},
		{withPrefix, "/%zz", "", "", true},
		{withPrefix, "/...", "/v1/...", "/v1/...", false},
		{withPrefix, "/a;b=c", "/v1/a;b=c", "/v1/a;b=c", false},
		{withPrefix, "/%252Fx", "/v1/%2Fx", "/v1/%252Fx", false},
	}
	for _, tt := range tests {
		path, raw, err := joinPath(tt.base, tt.tail)
		if tt.refused {
			var pe *pathError
			if !errors.As(err, &pe) {
				t.Errorf("joinPath(%s, %q) = %q, %v, want a refusal", tt.base, tt.tail, path, err)
			}
			continue
		}
		if err != nil || path != tt.path || raw != tt.rawPath {
			t.Errorf("joinPath(%s, %q) = %q, %q, %v, want %q, %q", tt.base, tt.tail, path, raw, err, tt.path, tt.rawPath)
			continue
		}
		u := &url.URL{Scheme: "https", Host: "api.example.com", Path: path, RawPath: raw}
		if u.EscapedPath() != raw {
			t.Errorf("joinPath(%s, %q): URL's escaped path %q, want %q", tt.base, tt.tail, u.EscapedPath(), raw)
		}
	}
}

const tok = "bbx_0123456789012345678901234567890123456789abc"

func TestSwapQuery(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a=1&b=2", "a=1&b=2"},
		{"key=" + tok, "key=v%2Fa+l%26ue"},
		{"key=" + tok + "&x=%20y&flag", "key=v%2Fa+l%26ue&x=%20y&flag"},
		{"key=%62bx_" + tok[4:], "key=v%2Fa+l%26ue"},
		{"prefix-" + tok + "=1", "prefix-v%2Fa+l%26ue=1"},
		{"bad=%zz" + tok, "bad=%zzv%2Fa+l%26ue"},
	}
	for _, tt := range tests {
		if got := swapQuery(tt.in, tok, "v/a l&ue"); got != tt.want {
			t.Errorf("swapQuery(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFindTokens(t *testing.T) {
	other := "bbx_" + strings.Repeat("Z", 43)
	tests := []struct {
		name   string
		target string
		header http.Header
		want   []string
	}{
		{"bearer", "/egress/X/y", http.Header{"Authorization": {"Bearer " + tok}}, []string{tok}},
		{"basic", "/egress/X/y", http.Header{"Authorization": {"Basic " + mustB64("u:"+tok)}}, []string{tok}},
		{"custom header", "/egress/X/y", http.Header{"X-Key": {"k=" + tok + ";"}}, []string{tok}},
		{"query", "/egress/X/y?a=1&key=" + tok, nil, []string{tok}},
		{"two", "/egress/X/y?key=" + other, http.Header{"X-Key": {tok}}, []string{tok, other}},
		{"non-bbx bearer", "/egress/X/y", http.Header{"Authorization": {"Bearer sk-1"}}, []string{"sk-1"}},
		{"none", "/egress/X/y", http.Header{"Accept": {"*/*"}}, nil},
	}
	c := &Capability{}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://broker"+tt.target, nil)
		for k, vs := range tt.header {
			r.Header[k] = vs
		}
		got := c.FindTokens(r)
		slices.Sort(got)
		slices.Sort(tt.want)
		if !slices.Equal(got, tt.want) {
			t.Errorf("FindTokens(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// mustB64 is "user:password" as Basic credentials encode it.
func mustB64(s string) string {
	h := http.Header{}
	r := &http.Request{Header: h}
	u, p, _ := strings.Cut(s, ":")
	r.SetBasicAuth(u, p)
	return strings.TrimPrefix(h.Get("Authorization"), "Basic ")
}

// roundTripFunc records that a request was sent.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestGuard_SendsOnlyToTheSecretsHost holds the second lock: whatever
// Rewrite did, the guard sends nothing elsewhere and nothing holding the
// token.
func TestGuard_SendsOnlyToTheSecretsHost(t *testing.T) {
	target, _ := url.Parse("https://api.example.com/v1/x")
	f := &flight{name: "X", token: tok, value: "VALUE", target: target, addr: dialAddr(target)}
	ctx := context.WithValue(context.Background(), ctxKey{}, f)
	tests := []struct {
		name   string
		url    string
		header http.Header
		want   error
	}{
		{"the secret's host", "https://api.example.com/v1/x", nil, nil},
		{"another host", "https://evil.example/v1/x", nil, errElsewhere},
		{"another port", "https://api.example.com:444/v1/x", nil, errElsewhere},
		{"another scheme", "http://api.example.com/v1/x", nil, errElsewhere},
		{"token in a header", "https://api.example.com/v1/x", http.Header{"X-Left": {tok}}, errTokenLeft},
		{"token in Basic", "https://api.example.com/v1/x", http.Header{"Authorization": {"Basic " + mustB64(tok+":")}}, errTokenLeft},
		{"token in the query", "https://api.example.com/v1/x?k=" + tok, nil, errTokenLeft},
		{"token in the path", "https://api.example.com/v1/" + tok, nil, errTokenLeft},
	}
	for _, tt := range tests {
		sent := false
		g := guard{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = true
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})}
		req, _ := http.NewRequestWithContext(ctx, "POST", tt.url, strings.NewReader("body"))
		for k, vs := range tt.header {
			req.Header[k] = vs
		}
		_, err := g.RoundTrip(req)
		if !errors.Is(err, tt.want) || sent != (tt.want == nil) {
			t.Errorf("guard.RoundTrip(%s) = %v, sent %v, want %v", tt.name, err, sent, tt.want)
		}
	}
	// With no flight at all nothing is sent.
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/x", nil)
	if _, err := (guard{next: http.DefaultTransport}).RoundTrip(req); !errors.Is(err, errElsewhere) {
		t.Errorf("guard.RoundTrip(no flight) = %v, want errElsewhere", err)
	}
}

// TestTransport_DialsOnlyTheSecretsHost calls egress's own dialer for an
// address other than the secret's: it is refused before any connection.
func TestTransport_DialsOnlyTheSecretsHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	allowed, _ := url.Parse(srv.URL)
	f := &flight{target: allowed, addr: dialAddr(allowed)}
	ctx := context.WithValue(context.Background(), ctxKey{}, f)
	tr := newTransport(proxy.TransportOptions{})
	defer tr.CloseIdleConnections()
	conn, err := tr.DialContext(ctx, "tcp", allowed.Host)
	if err != nil {
		t.Fatalf("dial the secret's host: %v", err)
	}
	conn.Close()
	for _, addr := range []string{"127.0.0.1:1", "evil.example:443", "localhost" + allowed.Host[strings.LastIndex(allowed.Host, ":"):]} {
		if _, err := tr.DialContext(ctx, "tcp", addr); !errors.Is(err, errElsewhere) {
			t.Errorf("dial %s = %v, want errElsewhere", addr, err)
		}
	}
	if _, err := tr.DialContext(context.Background(), "tcp", allowed.Host); !errors.Is(err, errElsewhere) {
		t.Errorf("dial with no flight = %v, want errElsewhere", err)
	}
}

func TestDecoding(t *testing.T) {
	tests := []struct {
		values []string
		want   string
		err    bool
	}{
		{nil, "", false},
		{[]string{""}, "", false},
		{[]string{"identity"}, "", false},
		{[]string{"gzip"}, "gzip", false},
		{[]string{"X-GZIP"}, "gzip", false},
		{[]string{"identity, gzip"}, "gzip", false},
		{[]string{"br"}, "", true},
		{[]string{"gzip, gzip"}, "", true},
		{[]string{"gzip, br"}, "", true},
		{[]string{"identity", "gzip"}, "", true},
		{[]string{"", "gzip"}, "", true},
		{[]string{"gzip", "gzip"}, "", true},
	}
	for _, tt := range tests {
		got, err := decoding(tt.values)
		var ee *proxy.EncodingError
		if got != tt.want || errors.As(err, &ee) != tt.err {
			t.Errorf("decoding(%q) = %q, %v, want %q, error %v", tt.values, got, err, tt.want, tt.err)
		}
	}
}

func TestFlight_Local(t *testing.T) {
	withPrefix, _ := protocol.ParseSecretHost("https://api.example.com/v1")
	bare, _ := protocol.ParseSecretHost("http://git.example:8080")
	tests := []struct {
		base *url.URL
		ref  string
		want string
	}{
		{withPrefix, "https://api.example.com/v1/charges?page=2#x", "/egress/N/charges?page=2#x"},
		{withPrefix, "https://API.example.com:443/v1", "/egress/N"},
		{withPrefix, "//api.example.com/v1/x", "/egress/N/x"},
		{withPrefix, "/v1/x?y", "/egress/N/x?y"},
		{withPrefix, "https://u:p@api.example.com/v1/x", "/egress/N/x"},
		{withPrefix, "http://api.example.com/v1/x", "http://api.example.com/v1/x"},
		{withPrefix, "https://api.example.com:8443/v1/x", "https://api.example.com:8443/v1/x"},
		{withPrefix, "https://api.example.com/v2/x", "https://api.example.com/v2/x"},
		{withPrefix, "https://api.example.com/v10", "https://api.example.com/v10"},
		{withPrefix, "https://files.example.com/v1/x", "https://files.example.com/v1/x"},
		{withPrefix, "next?page=2", "next?page=2"},
		{withPrefix, "/v2/x", "/v2/x"},
		{bare, "http://git.example:8080/o/r.git", "/egress/N/o/r.git"},
		{bare, "http://git.example/o/r.git", "http://git.example/o/r.git"},
		{bare, "/o/r.git", "/egress/N/o/r.git"},
		{bare, "mailto:x@git.example", "mailto:x@git.example"},
	}
	for _, tt := range tests {
		f := &flight{name: "N", base: tt.base}
		if got := f.local(tt.ref); got != tt.want {
			t.Errorf("local(%s, %q) = %q, want %q", tt.base, tt.ref, got, tt.want)
		}
	}
}

// TestFlight_LinksInTunnel: links under the secret's base are pointed
// at /egress/NAME for a request on the broker's own route, and left as
// the host sent them for one a proxy tunnel carries (InTunnel).
func TestFlight_LinksInTunnel(t *testing.T) {
	base, _ := protocol.ParseSecretHost("https://api.example.com/v1")
	sent := http.Header{
		"Location":         {"https://api.example.com/v1/items/2"},
		"Content-Location": {"/v1/items"},
		"Link":             {"<https://api.example.com/v1/items?page=2>; rel=\"next\""},
	}
	tests := []struct {
		ctx  context.Context
		want http.Header
	}{
		{context.Background(), http.Header{
			"Location":         {"/egress/N/items/2"},
			"Content-Location": {"/egress/N/items"},
			"Link":             {"</egress/N/items?page=2>; rel=\"next\""},
		}},
		{InTunnel(context.Background()), sent},
	}
	for _, tt := range tests {
		f := &flight{name: "N", base: base, tunnel: inTunnel(tt.ctx)}
		h := sent.Clone()
		f.localLinks(h)
		for k := range sent {
			if g, w := h.Get(k), tt.want.Get(k); g != w {
				t.Errorf("localLinks (in a tunnel: %v): %s = %q, want %q", f.tunnel, k, g, w)
			}
		}
	}
}

// TestHeaderHolds: the guard (carries) refuses, and a signing kind's
// rewrite (dropToken) deletes, exactly the headers that hold the box's
// token: in a name, a value, escaped, or in Basic credentials.
func TestHeaderHolds(t *testing.T) {
	const tok = "bbx_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok))
	tests := []struct {
		name string
		h    http.Header
		want bool
	}{
		{"none", http.Header{"Accept": {"*/*"}}, false},
		{"value", http.Header{"Authorization": {"Bearer " + tok}}, true},
		{"second value", http.Header{"X-Key": {"a", tok}}, true},
		{"escaped value", http.Header{"X-Key": {"%62" + tok[1:]}}, true},
		{"name", http.Header{"X-" + tok: {"1"}}, true},
		{"Basic credentials", http.Header{"Authorization": {basic}}, true},
		{"Basic credentials of another", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "https://api.example.com/", nil)
			req.Header = tt.h.Clone()
			if got := carries(req, tok); got != tt.want {
				t.Errorf("carries(%v) = %v, want %v", tt.h, got, tt.want)
			}
			h := tt.h.Clone()
			dropToken(h, tok)
			if kept := len(h) == len(tt.h); kept == tt.want {
				t.Errorf("dropToken(%v) left %v, want the header dropped: %v", tt.h, h, tt.want)
			}
		})
	}
}
