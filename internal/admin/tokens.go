package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// TokenPrefix begins every admin token, so one is recognisable in a
// request and in a leaked log, and is never mistaken for a box's token.
const TokenPrefix = "bba_"

// HashToken is the SHA-256 of an admin token, hex: the only form kept.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Mint makes a new admin token named name, stores its hash, and returns
// the token (to be shown once) with what was stored.
func Mint(ctx context.Context, st store.AdminTokens, name string, now time.Time) (string, store.AdminToken, error) {
	if len(name) > 200 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", store.AdminToken{}, errors.New("an admin token's name is at most 200 characters with no control characters")
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", store.AdminToken{}, fmt.Errorf("mint admin token: %w", err)
	}
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return "", store.AdminToken{}, fmt.Errorf("mint admin token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	t := store.AdminToken{ID: "adm-" + hex.EncodeToString(id), Hash: HashToken(token), Name: name, CreatedAt: now.UTC()}
	if err := st.CreateAdminToken(ctx, t); err != nil {
		return "", store.AdminToken{}, fmt.Errorf("store admin token: %w", err)
	}
	return token, t, nil
}

// Authentication failures; their messages never hold the token sent.
var (
	errNoAdminToken      = errors.New("no admin token")
	errUnknownAdminToken = errors.New("unknown admin token")
)

// lookup returns the admin token whose value is token, comparing the
// hashes in constant time.
func (s *Server) lookup(ctx context.Context, token string) (store.AdminToken, error) {
	if token == "" {
		return store.AdminToken{}, errNoAdminToken
	}
	hash := HashToken(token)
	t, err := s.cfg.Store.AdminTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return store.AdminToken{}, errUnknownAdminToken
	}
	if err != nil {
		return store.AdminToken{}, err
	}
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(hash)) != 1 {
		return store.AdminToken{}, errUnknownAdminToken
	}
	return t, nil
}

// bearer reads Authorization: Bearer <token>; "" when there is none.
func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(v[7:])
}

type adminTokenKey struct{}

// authenticated lets a request through only with a known admin token.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		t, err := s.lookup(r.Context(), bearer(r))
		switch {
		case errors.Is(err, errNoAdminToken):
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxbroker admin"`)
			return capability.Errorf(http.StatusUnauthorized, protocol.TypeAuthn,
				"The admin API needs an admin token: send Authorization: Bearer <token>. `boxbroker admin token` makes one.")
		case errors.Is(err, errUnknownAdminToken):
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxbroker admin", error="invalid_token"`)
			return capability.Errorf(http.StatusUnauthorized, protocol.TypeAuthn, "The token is no admin token at this broker.")
		case err != nil:
			return storeError(err, "", "")
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), adminTokenKey{}, t.ID)))
	}
}
