package egress

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/token"
)

// watchToken watches an answer from the secret's host for the box's own
// token as the host sent it, before the broker puts the token back in
// place of the value: a host that hands it back holds it (the box pushed
// its .env there, deflated in a packfile, where no scan of the request
// could see it). An answer that holds it is logged, naming the box and
// host and never the token, and audited, once. The answer's bytes pass
// as they came.
func (c *Capability) watchToken(resp *http.Response, f *flight) *proxy.AnswerWatch {
	return proxy.WatchAnswer(resp.Header, token.Body(f.token), func() {
		host := f.base.Host
		c.log.Warn("egress: the secret's host answered with the box's own token; the host holds it", "box", f.box, "secret", f.name, "host", host)
		if c.cfg.Audit != nil {
			c.cfg.Audit.Add(capability.TokenSeen(f.box, protocol.Egress, protocol.PrefixEgress+"/"+f.name, resp.Request.Method, host, resp.StatusCode, c.cfg.Now()))
		}
	})
}
