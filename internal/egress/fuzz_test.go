package egress

import (
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// fuzzToken is a box token as boxbroker mints them.
const fuzzToken = "bbx_Zk9xQ2VwV0h1cE5rT3ZyYkN6R2Y0WmF0dGVyc0FuZA"

// fuzzValue is the secret's value the token is swapped for.
const fuzzValue = "sv_live_51Hx+/= value&x"

// fuzzBases are secrets' hosts the fuzzer starts from; it may also give
// any host ParseHost accepts.
var fuzzBases = []string{
	"https://api.example.com",
	"http://127.0.0.1:9000/base",
	"https://[::1]:8443/v1/a%20b",
	"https://api.example.com:443/v1",
}

// FuzzOutbound holds the egress URL builder to its promise for any
// request path and query and any host the owner could save: either the
// request is refused with a message for the box, or it goes to exactly
// the secret's scheme, host and port, under its path prefix, with no dot
// segment, and with the box's token in neither its path nor its query.
func FuzzOutbound(f *testing.F) {
	seeds := []struct {
		host, path, query string
	}{
		{"", "/v1/charges", "key=" + fuzzToken},
		{"", "//evil.example/x", ""},
		{"", "/@evil.example", ""},
		{"", "/..%2f..%2fx", ""},
		{"", "/%2e%2e/admin", ""},
		{"", `/a\..\b`, ""},
		{"", "/a%2Fb%5c..", ""},
		{"", "/" + fuzzToken, ""},
		{"", "/x", "a=" + url.QueryEscape(fuzzToken) + "&" + fuzzToken + "=b"},
		{"", "/x", "%zz" + fuzzToken},
		{"", "/x:443#frag", "a=1#b"},
		{"https://API.example.com:8443/p/", "/%00/x", "a=b;c"},
		{"http://10.0.0.1", "/?q", ""},
		{"https://h.example/%2e", "/x", ""},
		{"http://0/", "/0", "0"},
		{"https://h.example/v1//", "//x", ""},
	}
	for _, s := range seeds {
		for i := range fuzzBases {
			f.Add(s.host, uint8(i), s.path, s.query)
		}
	}
	f.Fuzz(func(t *testing.T, host string, which uint8, path, query string) {
		base, err := protocol.ParseSecretHost(host)
		if err != nil {
			if base, err = protocol.ParseSecretHost(fuzzBases[int(which)%len(fuzzBases)]); err != nil {
				t.Fatalf("protocol.ParseSecretHost(%q) = %v", fuzzBases[int(which)%len(fuzzBases)], err)
			}
		}
		checkBase(t, host, base)
		// The request as net/http's server would parse it.
		if path != "" && !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		if strings.Contains(path, "?") {
			return // the query is the other argument
		}
		target := "/egress/STRIPE" + path
		if query != "" {
			target += "?" + query
		}
		in, err := url.ParseRequestURI(target)
		if err != nil {
			return // net/http's server refuses it before any handler
		}
		query = in.RawQuery
		name, tail, ok := split(in)
		if !ok || name != "STRIPE" {
			t.Fatalf("split(%q) name = %q, want STRIPE", in.EscapedPath(), name)
		}
		out, err := outbound(base, tail, query, fuzzToken, fuzzValue)
		if err != nil {
			pe, ok := err.(*pathError)
			if !ok || pe.msg == "" {
				t.Fatalf("outbound(%q, %q) error %#v is not a message for the box", tail, query, err)
			}
			return
		}
		checkOutbound(t, base, tail, query, out)
	})
}

// checkBase: what ParseHost accepts reads back as itself, with no user,
// query or fragment.
func checkBase(t *testing.T, host string, base *url.URL) {
	t.Helper()
	again, err := url.Parse(base.String())
	if err != nil || again.Scheme != base.Scheme || again.Host != base.Host || again.User != nil ||
		again.RawQuery != "" || again.Fragment != "" || again.EscapedPath() != base.EscapedPath() {
		t.Fatalf("protocol.ParseSecretHost(%q) = %s, which reads back as %+v (%v)", host, base, again, err)
	}
}

func checkOutbound(t *testing.T, base *url.URL, tail, query string, out *url.URL) {
	t.Helper()
	if out.Scheme != base.Scheme || out.Host != base.Host || out.User != nil || out.Opaque != "" {
		t.Fatalf("outbound(%s, %q, %q) = %s, want scheme and host %s://%s", base, tail, query, out, base.Scheme, base.Host)
	}
	// It reads back to the same scheme, host and port. (The query is left
	// out: it goes on the wire verbatim in the request line, checked
	// below, where a "#" in it is no fragment.)
	bare := *out
	bare.RawQuery = ""
	again, err := url.Parse(bare.String())
	if err != nil || again.Scheme != base.Scheme || again.Host != base.Host || again.User != nil {
		t.Fatalf("outbound(%s, %q, %q) = %s, which reads back as %+v (%v)", base, tail, query, out, again, err)
	}
	if again.Port() != base.Port() || again.Hostname() != base.Hostname() {
		t.Fatalf("outbound(%s, %q, %q) = %s: port %q host %q, want %q %q", base, tail, query, out, again.Port(), again.Hostname(), base.Port(), base.Hostname())
	}
	// The request line is in origin form: a host reading it sees a path
	// on itself, never another authority.
	line := out.RequestURI()
	if !strings.HasPrefix(line, "/") || strings.HasPrefix(line, "//") {
		t.Fatalf("outbound(%s, %q, %q) request line %q is not a path", base, tail, query, line)
	}
	if u, err := url.ParseRequestURI(line); err != nil || u.Host != "" {
		t.Fatalf("outbound(%s, %q, %q) request line %q reads as host %q (%v)", base, tail, query, line, u.Host, err)
	}
	// Under the base's path prefix, and never above it.
	if p := strings.TrimRight(base.Path, "/"); p != "" && out.Path != p && out.Path != p+"/" && !strings.HasPrefix(out.Path, p+"/") {
		t.Fatalf("outbound(%s, %q, %q) path %q is not under %q", base, tail, query, out.Path, p)
	}
	for _, seg := range strings.FieldsFunc(out.Path, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			t.Fatalf("outbound(%s, %q, %q) path %q holds a dot segment", base, tail, query, out.Path)
		}
	}
	if strings.Contains(out.Path, fuzzToken) || strings.Contains(out.EscapedPath(), fuzzToken) {
		t.Fatalf("outbound(%s, %q, %q) path %q holds the token", base, tail, query, out.EscapedPath())
	}
	for _, part := range queryParts(out.RawQuery) {
		if strings.Contains(part, fuzzToken) {
			t.Fatalf("outbound(%s, %q, %q) query %q holds the token", base, tail, query, out.RawQuery)
		}
	}
	if !othersGo(fuzzValue) {
		for _, part := range append(queryParts(out.RawQuery), out.RawQuery) {
			if _, n := proxy.ScrubTokens(part); n > 0 {
				t.Fatalf("outbound(%s, %q, %q) query %q holds a token", base, tail, query, out.RawQuery)
			}
		}
	}
	if !holdsToken(query) && out.RawQuery != query {
		t.Fatalf("outbound(%s, %q, %q) query = %q, want it unchanged", base, tail, query, out.RawQuery)
	}
}

// holdsToken reports whether a raw query holds the box's token, or
// anything written like a boxbroker token (which goes to the host as a
// marker), as sent or in any key or value decoded.
func holdsToken(query string) bool {
	if _, n := proxy.ScrubTokens(query); n > 0 || strings.Contains(query, fuzzToken) {
		return true
	}
	for _, part := range queryParts(query) {
		if _, n := proxy.ScrubTokens(part); n > 0 || strings.Contains(part, fuzzToken) {
			return true
		}
	}
	return false
}
