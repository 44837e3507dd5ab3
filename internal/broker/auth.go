package broker

import (
	"context"
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// authenticate finds the box whose token the request carries.
func (s *Server) authenticate(r *http.Request, c capability.Capability) (string, store.Box, error) {
	var tok string
	var err error
	if tf, ok := c.(capability.TokenFinder); ok && proxiedToken(r) == "" {
		tok, err = token.One(tf.FindTokens(r))
	} else if proxiedToken(r) != "" { // the HTTPS proxy's box: a token the request holds must be its own
		tok, err = token.One(findTokens(r, c))
	} else {
		tok, err = token.FromRequest(r)
	}
	if err == nil {
		var box store.Box
		box, err = s.boxByToken(r.Context(), tok)
		if err == nil {
			return tok, box, nil
		}
	}
	if !token.Refused(err) {
		return "", store.Box{}, unavailable(err)
	}
	if nr, ok := c.(capability.NoTokenRefuser); ok && errors.Is(err, token.ErrMissing) {
		return "", store.Box{}, nr.NoTokenRefusal(r)
	}
	// Every other refusal on a capability route is a 403: Claude Code retries a 401.
	return "", store.Box{}, &capability.Error{Status: http.StatusForbidden, Type: protocol.TypePermission, Message: authMessage(err)}
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
// comparing the hashes in constant time.
func (s *Server) boxByToken(ctx context.Context, tok string) (store.Box, error) {
	return token.Lookup(ctx, tok, s.cfg.Cache.BoxByTokenHash, boxTokenHash)
}

func boxTokenHash(b store.Box) string { return b.TokenHash }
