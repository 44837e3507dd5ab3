package sqlstore

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// SetPoolEntry creates or replaces the pool entry e.Name.
func (s *Store) SetPoolEntry(ctx context.Context, e store.PoolEntry) error {
	return s.put(ctx, fmt.Sprintf("set pool entry %q", e.Name), []store.Change{{Kind: store.ChangePool, Key: e.Name}},
		`INSERT INTO pool_entries (name, weight, url, sealed, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (name) DO UPDATE SET weight = excluded.weight, url = excluded.url, sealed = excluded.sealed, updated_at = excluded.updated_at`,
		e.Name, e.Weight, e.URL, Blob(e.Sealed), s.D.Time(e.UpdatedAt))
}

// PoolEntries returns every pool entry, by name.
func (s *Store) PoolEntries(ctx context.Context) ([]store.PoolEntry, error) {
	return collect(ctx, s, "list pool entries", "SELECT name, weight, url, sealed, updated_at FROM pool_entries ORDER BY name"+s.D.Collate(),
		func(r Scanner) (store.PoolEntry, error) {
			var e store.PoolEntry
			err := r.Scan(&e.Name, &e.Weight, &e.URL, &e.Sealed, Time(&e.UpdatedAt))
			return e, err
		})
}

// DeletePoolEntry removes the pool entry named name; store.ErrNotFound if none.
func (s *Store) DeletePoolEntry(ctx context.Context, name string) error {
	return s.touch(ctx, fmt.Sprintf("delete pool entry %q", name), []store.Change{{Kind: store.ChangePool, Key: name}},
		"DELETE FROM pool_entries WHERE name = $1", name)
}
