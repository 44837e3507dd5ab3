package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// Admin tokens are read from the store at each admin API request (package
// admin), so a token made or revoked is in force on every replica once it
// is answered: no Changed. Only the CLI on the data directory makes and
// revokes them: the first token has to be made where the store is.

// AdminTokenView is an admin token as a list shows it: never its value
// or hash. Role is "operator" or "viewer" (store.AdminRole).
type AdminTokenView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
	Role      string `json:"role"`
}

// adminTokenView is how a list shows t.
func adminTokenView(t store.AdminToken) AdminTokenView {
	return AdminTokenView{ID: t.ID, Name: t.Name, CreatedAt: formatTime(t.CreatedAt), Role: string(t.Role)}
}

// errTokenName refuses an admin token's name.
var errTokenName = Errorf(Invalid, "An admin token's name is at most 200 characters with no control characters.")

// MintRole makes a new admin token of role (store.AdminOperator, or
// store.AdminViewer for one that reads only) named name, stores its
// hash, and returns the token (to be shown once) with what was stored.
// It writes no audit row (MintAdminToken does); Invalid for a bad name
// or a role that is not one.
func MintRole(ctx context.Context, st store.AdminTokens, name string, role store.AdminRole, now time.Time) (string, store.AdminToken, error) {
	if len(name) > 200 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", store.AdminToken{}, errTokenName
	}
	if !role.Valid() {
		return "", store.AdminToken{}, Errorf(Invalid, "An admin token's role is %s or %s.", store.AdminOperator, store.AdminViewer)
	}
	tok, err := token.NewAdmin()
	if err != nil {
		return "", store.AdminToken{}, err
	}
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return "", store.AdminToken{}, fmt.Errorf("mint admin token: %w", err)
	}
	t := store.AdminToken{ID: "adm-" + hex.EncodeToString(id), Hash: token.Hash(tok), Name: name, CreatedAt: now.UTC(), Role: role}
	if err := st.CreateAdminToken(ctx, t); err != nil {
		return "", store.AdminToken{}, fmt.Errorf("store admin token: %w", err)
	}
	return tok, t, nil
}

// MintAdminToken makes a new admin token of role (store.AdminOperator,
// or store.AdminViewer for one that reads only) named name (a note of
// whose or what it is) and returns its value, shown this once (only its
// hash is kept), with its view. A token's role is set here, once: no
// action changes it. Invalid for a bad name or role.
func (s *Service) MintAdminToken(ctx context.Context, name string, role store.AdminRole) (string, AdminTokenView, error) {
	tok, t, err := MintRole(ctx, s.cfg.Store, name, role, s.cfg.Now())
	if err != nil {
		return "", AdminTokenView{}, err
	}
	v := adminTokenView(t)
	what := "made admin token " + t.ID
	if !role.CanWrite() {
		what += " (a viewer's: it reads only)"
	}
	if err := s.done(ctx, "", http.StatusCreated, what, "token", t.ID, "role", string(role)); err != nil {
		return "", AdminTokenView{}, err
	}
	return tok, v, nil
}

// AdminTokens lists the admin tokens, oldest first; never a value.
func (s *Service) AdminTokens(ctx context.Context) ([]AdminTokenView, error) {
	ts, err := s.cfg.Store.ListAdminTokens(ctx)
	return storeViews(ts, err, adminTokenView)
}

// RevokeAdminToken removes the admin token id: whoever holds it can no
// longer use the admin API or the owner's page. Invalid for a token's
// value given as its ID (never repeated), NotFound for no such token.
func (s *Service) RevokeAdminToken(ctx context.Context, id string) error {
	if strings.HasPrefix(id, token.AdminPrefix) {
		// Not repeated: it is the token itself.
		return Errorf(Invalid, "That is an admin token's value, not its ID: an ID is like adm-0123456789ab (see `boxbroker admin tokens`).")
	}
	err := s.cfg.Store.DeleteAdminToken(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Errorf(NotFound, "There is no admin token %s.", id)
	}
	if err != nil {
		return StoreError(err, "", "")
	}
	return s.done(ctx, "", http.StatusNoContent, "revoked admin token "+id, "token", id)
}
