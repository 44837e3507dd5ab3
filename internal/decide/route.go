package decide

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Route names the one route decide serves, for metrics and the audit log.
func (c *Capability) Route(r *http.Request) string { return protocol.RouteDecide }

// Allowed is POST for the one route decide serves; no other path under
// /decide is a route.
func (c *Capability) Allowed(r *http.Request) capability.Methods {
	if r.URL.Path == protocol.RouteDecide {
		return capability.MethodPost
	}
	return 0
}
