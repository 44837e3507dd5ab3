package spend

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
)

// Route is the wrapped capability's route template, so that metering a
// capability does not change how its requests are labelled; "" when it
// names none.
func (c *metered) Route(r *http.Request) string {
	if rt, ok := c.Capability.(capability.Router); ok {
		return rt.Route(r)
	}
	return ""
}

// Allowed is the methods the wrapped capability's route serves, so that
// metering a capability does not widen them; capability.StandardMethods
// when it names none.
func (c *metered) Allowed(r *http.Request) capability.Methods {
	if a, ok := c.Capability.(capability.Allower); ok {
		return a.Allowed(r)
	}
	return capability.StandardMethods
}
