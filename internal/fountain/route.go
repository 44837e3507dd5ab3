package fountain

import (
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// fountainMethods are the methods Fountain's REST API is called with.
const fountainMethods = capability.MethodGet | capability.MethodHead | capability.MethodPost |
	capability.MethodPut | capability.MethodPatch | capability.MethodDelete

// Routes are GET, HEAD, POST, PUT, PATCH and DELETE for each of the three
// families and every path under one (Parse judges the path in full, in
// Scopes), all labelled /fountain/*; no other path under /fountain is a
// route.
func (c *Capability) Routes() []capability.Route {
	var routes []capability.Route
	for _, f := range Families {
		routes = append(routes, capability.Under(protocol.PrefixFountain+"/api/"+f.Segment, fountainMethods, protocol.PrefixFountain+"/*")...)
	}
	return routes
}
