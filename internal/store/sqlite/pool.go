package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// SetPoolEntry creates or replaces the pool entry e.Name.
func (s *Store) SetPoolEntry(ctx context.Context, e store.PoolEntry) error {
	return s.write(ctx, fmt.Sprintf("set pool entry %q", e.Name), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO pool_entries (name, weight, url, sealed, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET weight = excluded.weight, url = excluded.url, sealed = excluded.sealed, updated_at = excluded.updated_at`,
			e.Name, e.Weight, e.URL, blob(e.Sealed), micros(e.UpdatedAt))
		return []store.Change{{Kind: store.ChangePool, Key: e.Name}}, err
	})
}

// PoolEntries returns every pool entry, by name.
func (s *Store) PoolEntries(ctx context.Context) ([]store.PoolEntry, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT name, weight, url, sealed, updated_at FROM pool_entries ORDER BY name")
	if err != nil {
		return nil, translate("list pool entries", err)
	}
	defer rows.Close()
	var out []store.PoolEntry
	for rows.Next() {
		var e store.PoolEntry
		var at int64
		if err := rows.Scan(&e.Name, &e.Weight, &e.URL, &e.Sealed, &at); err != nil {
			return nil, translate("list pool entries", err)
		}
		e.UpdatedAt = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list pool entries", err)
	}
	return out, nil
}

// DeletePoolEntry removes the pool entry named name; store.ErrNotFound if none.
func (s *Store) DeletePoolEntry(ctx context.Context, name string) error {
	return s.write(ctx, fmt.Sprintf("delete pool entry %q", name), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "DELETE FROM pool_entries WHERE name = ?", name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangePool, Key: name}}, notFound(res)
	})
}
