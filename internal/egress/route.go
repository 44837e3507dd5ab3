package egress

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
)

// Allowed is capability.StandardMethods (GET, HEAD, POST, PUT, PATCH,
// DELETE, OPTIONS: what HTTP APIs, their SDKs, git's smart HTTP and Git
// LFS send) for /egress/NAME and anything under it, and no method for a
// path that names no secret, which is no route. Any other method (TRACE,
// CONNECT, WebDAV's) never reaches a secret's host.
func (c *Capability) Allowed(r *http.Request) capability.Methods {
	if _, _, ok := split(r.URL); !ok {
		return 0
	}
	return capability.StandardMethods
}

// Decodes is gzip (and its old name x-gzip), up to MaxBody: git sends a
// fetch's negotiation gzip-compressed (Content-Encoding: gzip) once it is
// over 1 KiB, and SDKs compress large uploads (the AWS SDKs' request
// compression). The broker decodes such a body before Serve, so that the
// token in it is swapped and any other token scrubbed as in a body sent
// as it is, and the host receives it decoded.
func (c *Capability) Decodes(r *http.Request) ([]string, int64) {
	return []string{"gzip", "x-gzip"}, c.cfg.MaxBody
}
