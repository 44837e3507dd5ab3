package broker

import (
	"context"
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// authenticate finds the token the request carries on its route rt and
// admits its box (AdmitBox). A token that is no box's is refused with the
// route's own refusal (its NoToken, for a request that carries none) or
// a 403; the Admission is returned with a refusal of a known box.
func (s *Server) authenticate(r *http.Request, rt *route) (string, *Admission, error) {
	var tok string
	var err error
	if rt.Tokens != nil && proxiedToken(r) == "" {
		tok, err = token.One(rt.Tokens(r))
	} else if proxiedToken(r) != "" { // the HTTPS proxy's box: a token the request holds must be its own
		tok, err = token.One(findTokens(r, rt))
	} else {
		tok, err = token.FromRequest(r)
	}
	var adm *Admission
	if err == nil {
		adm, err = s.admitBox(r.Context(), tok, rt.c.Name(), s.Source(r))
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
	return "", nil, tokenRefusal(capability.Refuse(capability.ReasonToken, "%s", authMessage(err)))
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

func authMessage(err error) string {
	switch {
	case errors.Is(err, token.ErrMissing):
		return "The request carries no box token: send it as Authorization: Bearer <token>, or as x-api-key on the Anthropic routes."
	case errors.Is(err, token.ErrConflict):
		return "The request carries two different tokens; send the box's token once."
	}
	return "The token is no box's token at this broker."
}

// boxByToken returns the box whose token is tok, through the cache,
// comparing the hashes in constant time; old is true when tok is the
// box's old token, kept through a rotation's grace (judgeToken judges
// whether the grace still holds).
func (s *Server) boxByToken(ctx context.Context, tok string) (b store.Box, old bool, err error) {
	return token.LookupEither(ctx, tok, s.cfg.Cache.BoxByTokenHash, boxTokenHashes)
}

func boxTokenHashes(b store.Box) (string, string) { return b.TokenHash, b.OldTokenHash }
