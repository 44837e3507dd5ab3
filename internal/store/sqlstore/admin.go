package sqlstore

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

const adminTokenColumns = "id, hash, name, created_at, role"

func scanAdminToken(r Scanner) (store.AdminToken, error) {
	var t store.AdminToken
	err := r.Scan(&t.ID, &t.Hash, &t.Name, Time(&t.CreatedAt), &t.Role)
	return t, err
}

// CreateAdminToken stores t; store.ErrExists if its ID or hash is taken,
// an error if its role is not one of store.AdminRole's. Admin tokens
// are never cached, so no change is recorded.
func (s *Store) CreateAdminToken(ctx context.Context, t store.AdminToken) error {
	return s.put(ctx, fmt.Sprintf("create admin token %q", t.ID), nil,
		"INSERT INTO admin_tokens ("+adminTokenColumns+") VALUES ($1, $2, $3, $4, $5)",
		t.ID, t.Hash, t.Name, s.D.Time(t.CreatedAt), string(t.Role))
}

// AdminTokenByHash returns the admin token whose value hashes to hash, or
// store.ErrNotFound.
func (s *Store) AdminTokenByHash(ctx context.Context, hash string) (store.AdminToken, error) {
	return one(ctx, s, func() string { return "admin token by hash" }, "SELECT "+adminTokenColumns+" FROM admin_tokens WHERE hash = $1", scanAdminToken, hash)
}

// AdminToken returns the admin token with that ID, or store.ErrNotFound.
func (s *Store) AdminToken(ctx context.Context, id string) (store.AdminToken, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("admin token %q", id) }, "SELECT "+adminTokenColumns+" FROM admin_tokens WHERE id = $1", scanAdminToken, id)
}

// ListAdminTokens returns every admin token, oldest first (then by ID),
// with Hash left empty.
func (s *Store) ListAdminTokens(ctx context.Context) ([]store.AdminToken, error) {
	return collect(ctx, s, "list admin tokens", "SELECT "+adminTokenColumns+" FROM admin_tokens ORDER BY created_at, id"+s.D.Collate(),
		func(r Scanner) (store.AdminToken, error) {
			t, err := scanAdminToken(r)
			t.Hash = ""
			return t, err
		})
}

// DeleteAdminToken removes the admin token with that ID; store.ErrNotFound
// if there is none.
func (s *Store) DeleteAdminToken(ctx context.Context, id string) error {
	return s.touch(ctx, fmt.Sprintf("delete admin token %q", id), nil, "DELETE FROM admin_tokens WHERE id = $1", id)
}
