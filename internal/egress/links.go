package egress

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/intentius/boxbroker/internal/protocol"
)

// linkHeaders are the answer headers whose URLs the broker points back
// at itself.
var linkHeaders = []string{"Location", "Content-Location", "Link"}

// linkRef matches a URI reference in a Link header: <...>.
var linkRef = regexp.MustCompile(`<[^<>]*>`)

// tunnelKey marks the context of a request an HTTPS proxy tunnel
// carries (see InTunnel).
type tunnelKey struct{}

// InTunnel returns ctx marked as the context of a request the broker's
// HTTPS proxy serves in a tunnel (package egressproxy) and hands to
// /egress/NAME. The client in the tunnel asked the secret's host itself,
// and resolves a link against that host's URL, which the proxy serves:
// links in the answer are left naming the host, as it sent them (the
// value in them replaced all the same), rather than pointed at
// /egress/NAME, a path the client would ask the host for.
func InTunnel(ctx context.Context) context.Context {
	return context.WithValue(ctx, tunnelKey{}, true)
}

// inTunnel reports whether ctx is marked by InTunnel.
func inTunnel(ctx context.Context) bool {
	in, _ := ctx.Value(tunnelKey{}).(bool)
	return in
}

// localLinks rewrites every URL under the secret's base URL in h's
// Location, Content-Location and Link to the relative reference
// /egress/NAME/<rest>, so that a client following it comes back through
// the broker rather than going to the host with its token. A relative
// reference is resolved by the client against the URL it asked, which is
// the broker's, so the broker need not know its own scheme or host. A URL
// at another host, or outside the base's path, is left as the host sent
// it; so is every link in the answer to a request in a proxy tunnel,
// whose client asked the host's own URL (see InTunnel).
func (f *flight) localLinks(h http.Header) {
	if f.tunnel {
		return
	}
	for _, k := range linkHeaders {
		vs := h.Values(k)
		if len(vs) == 0 {
			continue
		}
		out := make([]string, len(vs))
		for i, v := range vs {
			if k == "Link" {
				out[i] = linkRef.ReplaceAllStringFunc(v, func(ref string) string {
					return "<" + f.local(ref[1:len(ref)-1]) + ">"
				})
			} else {
				out[i] = f.local(strings.TrimSpace(v))
			}
		}
		h[http.CanonicalHeaderKey(k)] = out
	}
}

// local returns ref as a reference to the broker's /egress/NAME route
// when it names a URL under the secret's base URL: absolute, scheme-
// relative or an absolute path. Otherwise it returns ref unchanged.
func (f *flight) local(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || u.Opaque != "" {
		return ref
	}
	switch {
	case u.Scheme != "" || u.Host != "":
		if u.Scheme != "" && u.Scheme != f.base.Scheme || !sameHost(u, f.base) {
			return ref
		}
	case !strings.HasPrefix(ref, "/"):
		return ref // relative to where the client is: the broker already
	}
	p := u.EscapedPath()
	rest, ok := strings.CutPrefix(p, f.base.EscapedPath())
	if !ok || rest != "" && rest[0] != '/' {
		return ref
	}
	out := protocol.PrefixEgress + "/" + f.name + rest
	if u.RawQuery != "" || u.ForceQuery {
		out += "?" + u.RawQuery
	}
	if u.Fragment != "" {
		out += "#" + u.EscapedFragment()
	}
	return out
}

// sameHost reports whether u names base's host (as hostKey tells hosts
// apart) and port, a scheme's default port written or not (a
// scheme-relative u takes base's scheme).
func sameHost(u, base *url.URL) bool {
	if hostKey(u.Hostname()) != hostKey(base.Hostname()) {
		return false
	}
	v := *u
	v.Scheme = base.Scheme
	_, port, _ := net.SplitHostPort(dialAddr(&v))
	_, basePort, _ := net.SplitHostPort(dialAddr(base))
	return port == basePort
}
