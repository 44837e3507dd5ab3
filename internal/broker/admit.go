package broker

import (
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// admit finds the capability that serves r and applies the rule and the
// box's limits: it returns the capability, what it may know of the call
// and the release of the box's limit, or the refusal.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, info *requestInfo) (capability.Capability, *capability.Call, func(), error) {
	// Nothing of the body is read until the token, read from the head,
	// is a box's: Scopes reads only the head.
	rt := s.route(r.URL.Path)
	if rt == nil {
		info.reason = "no route"
		return nil, nil, nil, capability.NotFound(r)
	}
	c := rt.c
	info.capability = c.Name()
	info.route = rt.label
	if proxiedToken(r) != "" {
		info.route = ProxiedRoutePrefix + rt.label
	}
	// The method is judged first: one no route serves goes no further,
	// upstream or into a record.
	if err := allowMethod(r, c); err != nil {
		info.reason = "method"
		if errors.Is(err, errNoRoute) {
			info.reason = "no route"
			return nil, nil, nil, capability.NotFound(r)
		}
		return nil, nil, nil, err
	}
	need, ok, err := c.Scopes(r)
	if err != nil {
		return nil, nil, nil, err
	}
	if !ok {
		info.reason = "no route"
		return nil, nil, nil, capability.NotFound(r)
	}
	if rt, isRouter := c.(capability.Router); isRouter {
		if route := rt.Route(r); route != "" {
			info.route = boundRoute(route)
		}
	}
	// A body in a content coding is judged from the head, before the
	// box is known; it is decoded only once the rule allows the request.
	coding, limit, err := bodyCoding(r, c)
	if err != nil {
		info.reason = "encoding"
		return nil, nil, nil, err
	}
	info.words = need.Words
	info.public = need.Public
	rc := http.NewResponseController(w)
	if need.Public {
		if coding != "" {
			// No public route takes an encoded body: none reads a body.
			info.reason = "encoding"
			return nil, nil, nil, unreadableBody(nil)
		}
		s.boundBody(rc, r)
		return c, &capability.Call{}, noRelease, nil
	}
	tok, box, err := s.authenticate(r, c)
	if err != nil {
		info.reason = "token"
		return nil, nil, nil, err
	}
	info.box = box.Name
	if box.Paused {
		info.reason = "paused"
		return nil, nil, nil, capability.Errorf(http.StatusForbidden, protocol.TypePermission,
			"This box is paused by its owner, so the broker serves it nothing until the owner resumes it (`boxbroker box resume %s`).", box.Name)
	}
	if bs, isBody := c.(capability.BodyScoper); isBody {
		// A body read to choose the words (feedback's) is small: one
		// still arriving after BodyTimeout is a client holding a
		// connection.
		_ = rc.SetReadDeadline(s.cfg.Now().Add(BodyTimeout))
		words, err := bs.BodyScopes(r)
		if err != nil {
			leaveBody(w, r) // over its bound, or stalled: read no more
			return nil, nil, nil, err
		}
		need.Words = words
		info.words = words
	}
	// Forwarded bodies stream afterwards, bounded by ReadTimeout.
	s.boundBody(rc, r)
	d, err := s.cfg.Cache.Declaration(r.Context(), box.Name)
	if err != nil {
		return nil, nil, nil, unavailable(err)
	}
	for _, word := range need.Words {
		if msg := protocol.DeclaredRefusal(d, s.cfg.Broker, c.Name(), word); msg != "" {
			info.reason = "declaration"
			return nil, nil, nil, &capability.Error{Status: http.StatusForbidden, Type: protocol.TypePermission, Message: msg}
		}
	}
	if s.cfg.Recording != nil {
		if err := s.cfg.Recording(); err != nil {
			info.reason = "cannot record"
			return nil, nil, nil, &capability.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeAPI,
				Message: "The broker cannot record calls just now (neither its store nor its spool takes a write), so it serves none; try again shortly.", Err: err}
		}
	}
	release, err := s.limits.acquire(box.Name)
	if err != nil {
		info.reason = "limit"
		return nil, nil, nil, err
	}
	if coding != "" {
		if err := decodeBody(w, r, limit); err != nil {
			release()
			info.reason = "encoding"
			return nil, nil, nil, err
		}
	}
	return c, &capability.Call{Box: box, Token: tok, Words: need.Words, Payer: s.cfg.Payer.Func(box)}, release, nil
}
