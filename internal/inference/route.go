package inference

import (
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// Route names the template r took: hello, messages, count_tokens, models,
// or one model (its id left out).
func (c *Capability) Route(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, protocol.PrefixAnthropic)
	switch {
	case p == "/api/hello", p == "/v1/messages", p == "/v1/messages/count_tokens", p == "/v1/models":
		return protocol.PrefixAnthropic + p
	case strings.HasPrefix(p, "/v1/models/"):
		return protocol.PrefixAnthropic + "/v1/models/{id}"
	}
	return protocol.PrefixAnthropic + "/*"
}

// Allowed names the methods each route serves: GET and HEAD for hello,
// POST for messages and count_tokens, GET for models and one model; no
// other path under /llm/anthropic is a route.
func (c *Capability) Allowed(r *http.Request) capability.Methods {
	p := strings.TrimPrefix(r.URL.Path, protocol.PrefixAnthropic)
	switch {
	case p == "/api/hello":
		return capability.MethodGet | capability.MethodHead
	case p == "/v1/messages", p == "/v1/messages/count_tokens":
		return capability.MethodPost
	case Forwarded(http.MethodGet, p):
		return capability.MethodGet
	}
	return 0
}
