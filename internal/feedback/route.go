package feedback

import (
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Routes are POST for the one route feedback serves, whose words are read
// from the batch (BodyScopes); no path under it is a route.
func (c *Capability) Routes() []capability.Route {
	return []capability.Route{{Pattern: protocol.RouteFeedback, Methods: capability.MethodPost, BodyScopes: c.BodyScopes}}
}
