package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"

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

// adminTokenKey is the context key of the caller a request was
// authenticated as.
type adminTokenKey struct{}

// caller is the admin token a request was authenticated with: its ID and
// role.
type caller struct {
	id   string
	role store.AdminRole
}

// reads reports whether a request of method only reads: GET, and HEAD,
// which a GET pattern serves too.
func reads(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// authenticated lets a request through only with a known admin token,
// and, with a token that may not write (a viewer's, or any role but an
// operator's), only a request that reads (GET or HEAD): every other
// method is refused here, on every route Handle adds, before its handler
// reads a byte of the body, so a route added later is read-only to a
// viewer without saying so.
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
		if !t.Role.CanWrite() && !reads(r.Method) {
			_, route, _ := strings.Cut(r.Pattern, " ")
			return operator.Errorf(operator.Forbidden,
				"The admin token %s is a viewer's: it reads (GET) and changes nothing, so it may not %s %s. Use an operator's admin token for that (`boxbroker admin token`, where the store is, makes one).",
				t.ID, r.Method, route)
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), adminTokenKey{}, caller{id: t.ID, role: t.Role})))
	}
}
