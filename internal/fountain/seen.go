package fountain

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/token"
)

// watchToken watches an answer from Fountain for the box's own token:
// Fountain then holds it (a sandbox's file, a conversation the box wrote
// it into). An answer that holds it is logged, naming the box and host
// and never the token, and audited, once. The answer's bytes pass as
// they came.
func (c *Capability) watchToken(resp *http.Response, cl *call) *proxy.AnswerWatch {
	return proxy.WatchAnswer(resp.Header, token.Body(cl.token), func() {
		host := c.cfg.Upstream.Host
		c.cfg.Logger.Warn("fountain: Fountain answered with the box's own token; it holds it", "box", cl.box, "host", host)
		if c.cfg.Audit != nil {
			c.cfg.Audit.Add(capability.TokenSeen(cl.box, protocol.Fountain, protocol.PrefixFountain, resp.Request.Method, host, resp.StatusCode, c.cfg.Now()))
		}
	})
}
