package decide

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/protocol"
)

// Route names the one route decide serves, for metrics and the audit log.
func (c *Capability) Route(r *http.Request) string { return protocol.RouteDecide }
