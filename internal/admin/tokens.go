package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// Lookup returns the admin token whose value is tok, comparing the
// hashes in constant time. It returns token.ErrMissing for "" and
// token.ErrUnknown for a token no admin token has.
func (s *Server) Lookup(ctx context.Context, tok string) (store.AdminToken, error) {
	return token.Lookup(ctx, tok, s.cfg.Store.AdminTokenByHash, func(t store.AdminToken) string { return t.Hash })
}

type adminTokenKey struct{}

// authenticated lets a request through only with a known admin token.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		t, err := s.Lookup(r.Context(), token.Bearer(r.Header))
		switch {
		case errors.Is(err, token.ErrMissing):
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxbroker admin"`)
			return operator.Errorf(operator.Unauthenticated,
				"The admin API needs an admin token: send Authorization: Bearer <token>. `boxbroker admin token` makes one.")
		case errors.Is(err, token.ErrUnknown):
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxbroker admin", error="invalid_token"`)
			return operator.Errorf(operator.Unauthenticated, "The token is no admin token at this broker.")
		case err != nil:
			return operator.StoreError(err, "", "")
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), adminTokenKey{}, t.ID)))
	}
}
