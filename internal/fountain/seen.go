package fountain

import (
	"io"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/token"
)

// tokenWatch watches an answer from Fountain for the box's own token:
// Fountain then holds it (a sandbox's file, a conversation the box wrote
// it into), which the broker records once an answer (tell). The
// answer's bytes pass as they came.
type tokenWatch struct {
	c    *Capability
	resp *http.Response
	cl   *call
	told bool
}

// watchToken begins watching resp, judging its headers at once.
func (c *Capability) watchToken(resp *http.Response, cl *call) *tokenWatch {
	w := &tokenWatch{c: c, resp: resp, cl: cl}
	if proxy.HeaderHolds(resp.Header, token.Body(cl.token)) {
		w.tell()
	}
	return w
}

// body is the answer's body, watched for the token.
func (w *tokenWatch) body(b io.ReadCloser) io.ReadCloser {
	if w.told {
		return b
	}
	return proxy.Watch(b, token.Body(w.cl.token), w.tell)
}

// tell logs, naming the box and host and never the token, and audits
// the answer.
func (w *tokenWatch) tell() {
	if w.told {
		return
	}
	w.told = true
	host := w.c.cfg.Upstream.Host
	w.c.cfg.Logger.Warn("fountain: Fountain answered with the box's own token; it holds it", "box", w.cl.box, "host", host)
	if w.c.cfg.Audit != nil {
		w.c.cfg.Audit.Add(capability.TokenSeen(w.cl.box, protocol.Fountain, protocol.PrefixFountain, w.resp.Request.Method, host, w.resp.StatusCode, w.c.cfg.Now()))
	}
}
