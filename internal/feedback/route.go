package feedback

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/protocol"
)

// Route names the one route feedback serves, for metrics and the audit log.
func (c *Capability) Route(r *http.Request) string { return protocol.RouteFeedback }
