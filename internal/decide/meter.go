package decide

import (
	"bytes"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// MeterBody reports that POST /decide/v1/systemone is metered, its body
// read up to Config.MaxBody.
func (c *Capability) MeterBody(r *http.Request) (int64, bool) {
	return c.cfg.MaxBody, r.Method == http.MethodPost && r.URL.Path == protocol.RouteDecide
}

// Estimate bounds a decide request's model calls: one for each question
// the broker asks, each at most Config.MaxTokens, and each of the input
// of the largest Messages body a question is asked with (InputBytes):
// a choice question's output schema holds a property and a description
// for each of its options, and its criteria and the state are indented,
// so a question's body may run to many times the request's bytes. A
// request whose body was not read whole, or that decide refuses once its
// tokens are replaced (parseScrubbed), asks nothing.
func (c *Capability) Estimate(_ *http.Request, body []byte) capability.Estimate {
	if body == nil {
		return capability.Estimate{}
	}
	// The request decide asks, read from a copy: the body goes on.
	req, _, err := parseScrubbed(bytes.Clone(body))
	if err != nil {
		return capability.Estimate{}
	}
	n := req.asked()
	if n == 0 {
		return capability.Estimate{}
	}
	// The state, the same in every question's body, is laid out and
	// escaped once (see questionBody).
	state, _ := marshal(indent(req.State)) // a string always encodes
	var most int64
	for i := range req.Questions {
		if q := &req.Questions[i]; q.Asked() {
			if b, err := questionBody(req, q, c.cfg.MaxTokens, ""); err == nil {
				most = max(most, int64(len(b)+len(state)-len(`""`)))
			}
		}
	}
	return capability.Estimate{Model: req.Model, MaxTokens: int64(c.cfg.MaxTokens), Capped: true, Calls: int64(n), InputBytes: most}
}
