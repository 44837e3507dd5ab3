package broker

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
)

// readBodyToken lets r's route rt find a box's token in r's body when
// r's head carries none (capability.Route.BodyTokens: egress, for an API that
// takes its key in a body field, such as an OAuth client_secret). It
// does so only for a request from the broker's own listener (not one
// handed in, whose token its Handoff holds) whose head holds no token at all, and whose body has a declared length of
// at most capability.MaxBodyTokenBytes; that body is read under
// BodyTimeout, as a body a route's BodyScopes reads is. So an unauthenticated
// client can have the broker read no more, and wait no longer, than
// net/http would for a body left unread. It reports whether rt found a
// token there.
func (s *Server) readBodyToken(rc *http.ResponseController, r *http.Request, rt *route) bool {
	if rt.BodyTokens == nil || r.Body == nil || r.Body == http.NoBody ||
		r.ContentLength <= 0 || r.ContentLength > capability.MaxBodyTokenBytes {
		return false
	}
	if rt.Tokens != nil && len(rt.Tokens(r)) > 0 {
		return false
	}
	_ = rc.SetReadDeadline(s.cfg.Now().Add(BodyTimeout))
	return len(rt.BodyTokens(r)) > 0
}
