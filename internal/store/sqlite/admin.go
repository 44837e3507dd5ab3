package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

const adminTokenColumns = "id, hash, name, created_at"

func scanAdminToken(r rowScanner) (store.AdminToken, error) {
	var t store.AdminToken
	var created int64
	err := r.Scan(&t.ID, &t.Hash, &t.Name, &created)
	t.CreatedAt = fromMicros(created)
	return t, err
}

// CreateAdminToken stores t; store.ErrExists if its ID or hash is taken.
// Admin tokens are never cached, so no change is recorded.
func (s *Store) CreateAdminToken(ctx context.Context, t store.AdminToken) error {
	return s.write(ctx, fmt.Sprintf("create admin token %q", t.ID), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, "INSERT INTO admin_tokens ("+adminTokenColumns+") VALUES (?, ?, ?, ?)",
			t.ID, t.Hash, t.Name, micros(t.CreatedAt))
		return nil, err
	})
}

// AdminTokenByHash returns the admin token whose value hashes to hash, or
// store.ErrNotFound.
func (s *Store) AdminTokenByHash(ctx context.Context, hash string) (store.AdminToken, error) {
	t, err := scanAdminToken(s.r.QueryRowContext(ctx, "SELECT "+adminTokenColumns+" FROM admin_tokens WHERE hash = ?", hash))
	if err != nil {
		return store.AdminToken{}, translate("admin token by hash", err)
	}
	return t, nil
}

// AdminToken returns the admin token with that ID, or store.ErrNotFound.
func (s *Store) AdminToken(ctx context.Context, id string) (store.AdminToken, error) {
	t, err := scanAdminToken(s.r.QueryRowContext(ctx, "SELECT "+adminTokenColumns+" FROM admin_tokens WHERE id = ?", id))
	if err != nil {
		return store.AdminToken{}, translate(fmt.Sprintf("admin token %q", id), err)
	}
	return t, nil
}

// ListAdminTokens returns every admin token, oldest first (then by ID),
// with Hash left empty.
func (s *Store) ListAdminTokens(ctx context.Context) ([]store.AdminToken, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+adminTokenColumns+" FROM admin_tokens ORDER BY created_at, id")
	if err != nil {
		return nil, translate("list admin tokens", err)
	}
	defer rows.Close()
	var out []store.AdminToken
	for rows.Next() {
		t, err := scanAdminToken(rows)
		if err != nil {
			return nil, translate("list admin tokens", err)
		}
		t.Hash = ""
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list admin tokens", err)
	}
	return out, nil
}

// DeleteAdminToken removes the admin token with that ID; store.ErrNotFound
// if there is none.
func (s *Store) DeleteAdminToken(ctx context.Context, id string) error {
	return s.write(ctx, fmt.Sprintf("delete admin token %q", id), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "DELETE FROM admin_tokens WHERE id = ?", id)
		if err != nil {
			return nil, err
		}
		return nil, notFound(res)
	})
}
