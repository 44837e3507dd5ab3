package decide

import (
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Routes are POST for the one route decide serves; no other path under
// /decide is a route.
func (c *Capability) Routes() []capability.Route {
	return []capability.Route{{Pattern: protocol.RouteDecide, Methods: capability.MethodPost}}
}
