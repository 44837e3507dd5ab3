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
