package egress

import (
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Routes are capability.StandardMethods (GET, HEAD, POST, PUT, PATCH,
// DELETE, OPTIONS: what HTTP APIs, their SDKs, git's smart HTTP and Git
// LFS send) for /egress/NAME and anything under it, labelled /egress/*;
// Scopes judges the name (a path that names no secret is no route). Any
// other method (TRACE, CONNECT, WebDAV's) never reaches a secret's host.
//
// A body may come in gzip (and its old name x-gzip), up to MaxBody: git
// sends a fetch's negotiation gzip-compressed (Content-Encoding: gzip)
// once it is over 1 KiB, and SDKs compress large uploads (the AWS SDKs'
// request compression). The broker decodes such a body before Serve, so
// that the token in it is swapped and any other token scrubbed as in a
// body sent as it is, and the host receives it decoded.
//
// The box's token may be wherever the API expects its key (FindTokens),
// or, for a request whose head carries none, in a small body
// (FindBodyTokens); a request that carries none is refused with a 401
// (NoTokenRefusal).
func (c *Capability) Routes() []capability.Route {
	route := func(pattern string) capability.Route {
		return capability.Route{Pattern: pattern, Methods: capability.StandardMethods, Label: protocol.PrefixEgress + "/*",
			Codings: []string{"gzip", "x-gzip"}, CodedLimit: c.cfg.MaxBody,
			Tokens: c.FindTokens, BodyTokens: c.FindBodyTokens, NoToken: c.NoTokenRefusal}
	}
	return []capability.Route{route(protocol.PrefixEgress + "/{name}"), route(protocol.PrefixEgress + "/{name}/{rest...}")}
}
