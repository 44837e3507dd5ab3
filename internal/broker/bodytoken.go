package broker

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
)

// readBodyToken lets c find a box's token in r's body when r's head
// carries none (capability.BodyTokenFinder: egress, for an API that
// takes its key in a body field, such as an OAuth client_secret). It
// does so only for a request not served through the HTTPS proxy, whose
// head holds no token at all, and whose body has a declared length of
// at most capability.MaxBodyTokenBytes; that body is read under
// BodyTimeout, as a body a BodyScoper reads is. So an unauthenticated
// client can have the broker read no more, and wait no longer, than
// net/http would for a body left unread. It reports whether c found a
// token there.
func (s *Server) readBodyToken(rc *http.ResponseController, r *http.Request, c capability.Capability) bool {
	bf, ok := c.(capability.BodyTokenFinder)
	if !ok || proxiedToken(r) != "" || r.Body == nil || r.Body == http.NoBody ||
		r.ContentLength <= 0 || r.ContentLength > capability.MaxBodyTokenBytes {
		return false
	}
	if tf, ok := c.(capability.TokenFinder); ok && len(tf.FindTokens(r)) > 0 {
		return false
	}
	_ = rc.SetReadDeadline(s.cfg.Now().Add(BodyTimeout))
	return len(bf.FindBodyTokens(r)) > 0
}
