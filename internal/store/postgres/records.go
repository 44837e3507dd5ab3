package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// AddFeedback stores f and returns its ID; store.ErrNotFound if there is
// no box named f.Box. f.ID is ignored. Feedback is never cached, so no
// change is recorded.
func (s *Store) AddFeedback(ctx context.Context, f store.FeedbackBatch) (int64, error) {
	words := f.Words
	if words == nil {
		words = []string{}
	}
	var id int64
	err := s.write(ctx, fmt.Sprintf("add feedback of box %q", f.Box), func(tx pgx.Tx) ([]store.Change, error) {
		return nil, tx.QueryRow(ctx, "INSERT INTO feedback (box, at, words, body) VALUES ($1, $2, $3, $4) RETURNING id",
			f.Box, f.At, words, bytea(f.Body)).Scan(&id)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// ListFeedback returns the batches of box, oldest first.
func (s *Store) ListFeedback(ctx context.Context, box string) ([]store.FeedbackBatch, error) {
	op := fmt.Sprintf("list feedback of box %q", box)
	rows, err := s.pool.Query(ctx, "SELECT id, at, words, body FROM feedback WHERE box = $1 ORDER BY id", box)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.FeedbackBatch, error) {
		f := store.FeedbackBatch{Box: box}
		err := r.Scan(&f.ID, &f.At, &f.Words, &f.Body)
		f.At = f.At.UTC()
		if len(f.Words) == 0 {
			f.Words = nil
		}
		return f, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// AddResource records r as r.Box's: store.ErrExists if another box owns
// r.Kind/r.ID, store.ErrNotFound if there is no box named r.Box. Recording
// it again for the same box changes nothing and is not an error.
func (s *Store) AddResource(ctx context.Context, r store.Resource) error {
	key := r.Kind + "/" + r.ID
	return s.write(ctx, fmt.Sprintf("add resource %q for box %q", key, r.Box), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, "INSERT INTO resources (kind, id, box, at) VALUES ($1, $2, $3, $4) ON CONFLICT (kind, id) DO NOTHING",
			r.Kind, r.ID, r.Box, r.At)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 1 {
			return []store.Change{{Kind: store.ChangeResource, Key: key}}, nil
		}
		var owner string
		if err := tx.QueryRow(ctx, "SELECT box FROM resources WHERE kind = $1 AND id = $2", r.Kind, r.ID).Scan(&owner); err != nil {
			return nil, err
		}
		if owner != r.Box {
			return nil, store.ErrExists
		}
		return nil, nil
	})
}

// ResourceOwner returns the box that owns kind/id, or store.ErrNotFound.
func (s *Store) ResourceOwner(ctx context.Context, kind, id string) (string, error) {
	var box string
	err := s.pool.QueryRow(ctx, "SELECT box FROM resources WHERE kind = $1 AND id = $2", kind, id).Scan(&box)
	if err != nil {
		return "", translate(fmt.Sprintf("owner of resource %q", kind+"/"+id), err)
	}
	return box, nil
}

// ListResources returns the resources of box, by kind and ID.
func (s *Store) ListResources(ctx context.Context, box string) ([]store.Resource, error) {
	op := fmt.Sprintf("list resources of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT kind, id, at FROM resources WHERE box = $1 ORDER BY kind COLLATE "C", id COLLATE "C"`, box)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Resource, error) {
		r := store.Resource{Box: box}
		err := row.Scan(&r.Kind, &r.ID, &r.At)
		r.At = r.At.UTC()
		return r, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// DeleteResource forgets kind/id; store.ErrNotFound if unknown.
func (s *Store) DeleteResource(ctx context.Context, kind, id string) error {
	key := kind + "/" + id
	return s.write(ctx, fmt.Sprintf("delete resource %q", key), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, "DELETE FROM resources WHERE kind = $1 AND id = $2", kind, id)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeResource, Key: key}}, notFound(tag)
	})
}

const grantColumns = "id, hash, box, principal, created_at, expires_at, revoked_at"

func scanGrant(r pgx.Row) (store.Grant, error) {
	var g store.Grant
	var expires, revoked *time.Time
	err := r.Scan(&g.ID, &g.Hash, &g.Box, &g.Principal, &g.CreatedAt, &expires, &revoked)
	g.CreatedAt = g.CreatedAt.UTC()
	g.ExpiresAt = fromNullTime(expires)
	g.RevokedAt = fromNullTime(revoked)
	return g, err
}

// CreateGrant stores g: store.ErrExists if its ID or hash is taken,
// store.ErrNotFound if there is no box named g.Box. A zero ExpiresAt or
// RevokedAt is kept as zero.
func (s *Store) CreateGrant(ctx context.Context, g store.Grant) error {
	return s.write(ctx, fmt.Sprintf("create grant %q for box %q", g.ID, g.Box), func(tx pgx.Tx) ([]store.Change, error) {
		_, err := tx.Exec(ctx, "INSERT INTO grants ("+grantColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7)",
			g.ID, g.Hash, g.Box, g.Principal, g.CreatedAt, nullTime(g.ExpiresAt), nullTime(g.RevokedAt))
		return []store.Change{{Kind: store.ChangeGrant, Key: g.Hash}}, err
	})
}

// GrantByHash returns the grant whose value hashes to hash, or
// store.ErrNotFound. An expired or revoked grant is returned as it is.
func (s *Store) GrantByHash(ctx context.Context, hash string) (store.Grant, error) {
	g, err := scanGrant(s.pool.QueryRow(ctx, "SELECT "+grantColumns+" FROM grants WHERE hash = $1", hash))
	if err != nil {
		return store.Grant{}, translate("grant by hash", err)
	}
	return g, nil
}

// ListGrants returns the grants of box, newest first (by CreatedAt, then ID).
func (s *Store) ListGrants(ctx context.Context, box string) ([]store.Grant, error) {
	op := fmt.Sprintf("list grants of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT `+grantColumns+` FROM grants WHERE box = $1 ORDER BY created_at DESC, id COLLATE "C" DESC`, box)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Grant, error) { return scanGrant(r) })
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// RevokeGrant marks the grant id revoked at at; store.ErrNotFound if none.
// A grant already revoked keeps its first revocation time.
func (s *Store) RevokeGrant(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("revoke grant %q: zero revocation time", id)
	}
	return s.write(ctx, fmt.Sprintf("revoke grant %q", id), func(tx pgx.Tx) ([]store.Change, error) {
		var hash string
		err := tx.QueryRow(ctx, "UPDATE grants SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 RETURNING hash", at, id).Scan(&hash)
		return []store.Change{{Kind: store.ChangeGrant, Key: hash}}, err
	})
}

// ChangesSince returns up to limit changes with Seq > after, in Seq order.
// limit must be positive.
func (s *Store) ChangesSince(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("changes since %d: limit %d is not positive", after, limit)
	}
	rows, err := s.pool.Query(ctx, "SELECT seq, kind, key FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2", after, limit)
	if err != nil {
		return nil, translate("changes", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Change, error) {
		var c store.Change
		err := r.Scan(&c.Seq, &c.Kind, &c.Key)
		return c, err
	})
	if err != nil {
		return nil, translate("changes", err)
	}
	return out, nil
}

// LastChange returns the highest Seq written so far, 0 for none. Pruning
// never removes the newest change, so this never goes back.
func (s *Store) LastChange(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, "SELECT COALESCE(MAX(seq), 0) FROM changes").Scan(&seq); err != nil {
		return 0, translate("last change", err)
	}
	return seq, nil
}

// PruneChanges forgets changes recorded before before, except the newest
// one, which LastChange reports.
func (s *Store) PruneChanges(ctx context.Context, before time.Time) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM changes WHERE at < $1 AND seq < (SELECT MAX(seq) FROM changes)", before)
	return translate("prune changes", err)
}
