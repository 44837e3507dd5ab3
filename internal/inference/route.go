package inference

import (
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Routes are GET and HEAD for hello, POST for messages and count_tokens,
// GET for models and one model (its id left out of the label); no other
// path under /llm/anthropic is a route.
func (c *Capability) Routes() []capability.Route {
	return []capability.Route{
		{Pattern: protocol.PrefixAnthropic + "/api/hello", Methods: capability.MethodGet | capability.MethodHead},
		{Pattern: protocol.PrefixAnthropic + "/v1/messages", Methods: capability.MethodPost},
		{Pattern: protocol.PrefixAnthropic + "/v1/messages/count_tokens", Methods: capability.MethodPost},
		{Pattern: protocol.PrefixAnthropic + "/v1/models", Methods: capability.MethodGet},
		{Pattern: protocol.PrefixAnthropic + "/v1/models/{id}", Methods: capability.MethodGet},
	}
}
