package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// SetPoolEntry creates or replaces the pool entry e.Name.
func (s *Store) SetPoolEntry(ctx context.Context, e store.PoolEntry) error {
	return s.write(ctx, fmt.Sprintf("set pool entry %q", e.Name), func(tx pgx.Tx) ([]store.Change, error) {
		_, err := tx.Exec(ctx, `INSERT INTO pool_entries (name, weight, url, sealed, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (name) DO UPDATE SET weight = excluded.weight, url = excluded.url, sealed = excluded.sealed, updated_at = excluded.updated_at`,
			e.Name, e.Weight, e.URL, bytea(e.Sealed), e.UpdatedAt)
		return []store.Change{{Kind: store.ChangePool, Key: e.Name}}, err
	})
}

// PoolEntries returns every pool entry, by name.
func (s *Store) PoolEntries(ctx context.Context) ([]store.PoolEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, weight, url, sealed, updated_at FROM pool_entries ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, translate("list pool entries", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.PoolEntry, error) {
		var e store.PoolEntry
		err := r.Scan(&e.Name, &e.Weight, &e.URL, &e.Sealed, &e.UpdatedAt)
		e.UpdatedAt = e.UpdatedAt.UTC()
		return e, err
	})
	if err != nil {
		return nil, translate("list pool entries", err)
	}
	return out, nil
}

// DeletePoolEntry removes the pool entry named name; store.ErrNotFound if none.
func (s *Store) DeletePoolEntry(ctx context.Context, name string) error {
	return s.write(ctx, fmt.Sprintf("delete pool entry %q", name), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, "DELETE FROM pool_entries WHERE name = $1", name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangePool, Key: name}}, notFound(tag)
	})
}
