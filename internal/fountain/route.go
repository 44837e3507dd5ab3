package fountain

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
)

// fountainMethods are the methods Fountain's REST API is called with.
const fountainMethods = capability.MethodGet | capability.MethodHead | capability.MethodPost |
	capability.MethodPut | capability.MethodPatch | capability.MethodDelete

// Allowed is GET, HEAD, POST, PUT, PATCH and DELETE for a path in one of
// the three families (Parse), and no method for any other path under
// /fountain, which is no route.
func (c *Capability) Allowed(r *http.Request) capability.Methods {
	if _, ok := Parse(r.URL.Path); !ok {
		return 0
	}
	return fountainMethods
}
