package egress

import (
	"io"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/token"
)

// tokenWatch watches an answer from the secret's host for the box's own
// token as the host sent it, before the broker puts the token back in
// place of the value: a host that hands it back holds it (the box pushed
// its .env there, deflated in a packfile, where no scan of the request
// could see it). An answer that holds it is recorded once (tell). The
// answer's bytes pass as they came.
type tokenWatch struct {
	c    *Capability
	resp *http.Response
	f    *flight
	told bool
}

// watchToken begins watching resp, judging its headers at once.
func (c *Capability) watchToken(resp *http.Response, f *flight) *tokenWatch {
	w := &tokenWatch{c: c, resp: resp, f: f}
	if proxy.HeaderHolds(resp.Header, token.Body(f.token)) {
		w.tell()
	}
	return w
}

// body is the answer's body, decoded, watched for the token.
func (w *tokenWatch) body(b io.ReadCloser) io.ReadCloser {
	if w.told {
		return b
	}
	return proxy.Watch(b, token.Body(w.f.token), w.tell)
}

// tell logs, naming the box and host and never the token, and audits
// the answer.
func (w *tokenWatch) tell() {
	if w.told {
		return
	}
	w.told = true
	c, f, host := w.c, w.f, w.f.base.Host
	c.log.Warn("egress: the secret's host answered with the box's own token; the host holds it", "box", f.box, "secret", f.name, "host", host)
	if c.cfg.Audit != nil {
		c.cfg.Audit.Add(capability.TokenSeen(f.box, protocol.Egress, protocol.PrefixEgress+"/"+f.name, w.resp.Request.Method, host, w.resp.StatusCode, c.now()))
	}
}
