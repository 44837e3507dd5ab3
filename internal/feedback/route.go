package feedback

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Route names the one route feedback serves, for metrics and the audit log.
func (c *Capability) Route(r *http.Request) string { return protocol.RouteFeedback }

// Allowed is POST for the one route feedback serves; no path under it is
// a route.
func (c *Capability) Allowed(r *http.Request) capability.Methods {
	if r.URL.Path == protocol.RouteFeedback {
		return capability.MethodPost
	}
	return 0
}
