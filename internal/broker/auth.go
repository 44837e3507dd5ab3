package broker

import (
	"errors"
	"net/http"
	"net/netip"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/token"
)

// authenticate finds the token the request carries on its route rt and
// admits its box (AdmitBox). A token that is no box's is refused with the
// route's own refusal (its NoToken, for a request that carries none) or
// a 403; the Admission is returned with a refusal of a known box. A
// request handed in (hd not nil) is authenticated by hd's Token, which a
// token the request carries itself must equal. The token is judged as
// sent from from (source).
func (s *Server) authenticate(r *http.Request, rt *route, hd *Handoff, from netip.Addr) (string, *Admission, error) {
	var handed []string
	if hd != nil {
		handed = []string{hd.Token}
	}
	tok, err := token.FromRoute(r, rt.Tokens, handed...)
	var adm *Admission
	if err == nil {
		adm, err = s.AdmitBox(r.Context(), tok, rt.c.Name(), from)
		if err == nil {
			return tok, adm, nil
		}
	}
	if !token.Refused(err) {
		return "", adm, err
	}
	if rt.NoToken != nil && errors.Is(err, token.ErrMissing) {
		return "", nil, tokenRefusal(rt.NoToken(r))
	}
	// Every other refusal on a capability route is a 403: Claude Code retries a 401.
	return "", nil, tokenRefused(err)
}

// tokenRefusal is e, a refusal of a request that carries no box's token,
// with the reason the records keep for it (capability.ReasonToken).
func tokenRefusal(e *capability.Error) *capability.Error {
	c := *e
	if c.Reason == "" {
		c.Reason = capability.ReasonToken
	}
	return &c
}

// tokenRefused is the 403 of a request whose token err (token.Refused)
// says is no box's: missing, two different ones, or unknown.
func tokenRefused(err error) *capability.Error {
	switch {
	case errors.Is(err, token.ErrMissing):
		return capability.Refuse(capability.ReasonToken, "The request carries no box token: send it as Authorization: Bearer <token>, or as x-api-key on the Anthropic routes.")
	case errors.Is(err, token.ErrConflict):
		return capability.Refuse(capability.ReasonToken, "The request carries two different tokens; send the box's token once.")
	}
	return capability.UnknownToken()
}

// readBodyToken lets r's route rt find a box's token in r's body when
// r's head carries none (capability.Route.BodyTokens: egress, for an API
// that takes its key in a body field, such as an OAuth client_secret). It
// does so only for a request from the broker's own listener (not one
// handed in, whose token its Handoff holds) whose head holds no token at
// all, and whose body has a declared length of at most
// capability.MaxBodyTokenBytes; that body is read under BodyTimeout, as a
// body a route's BodyScopes reads is. So an unauthenticated client can
// have the broker read no more, and wait no longer, than net/http would
// for a body left unread. It reports whether rt found a token there.
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
