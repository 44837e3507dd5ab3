package sqlstore

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// SetMintState creates or replaces the state of a minted secret;
// store.ErrNotFound if there is no such secret. It is never cached, so
// no change is recorded.
func (s *Store) SetMintState(ctx context.Context, st store.MintState) error {
	return s.put(ctx, fmt.Sprintf("set mint state of secret %q of box %q", st.Name, st.Box), nil,
		`INSERT INTO secret_mints (box, name, of, sealed, expires_at, failure, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (box, name) DO UPDATE SET of = excluded.of, sealed = excluded.sealed, expires_at = excluded.expires_at,
			failure = excluded.failure, updated_at = excluded.updated_at`,
		st.Box, st.Name, st.Of, st.Sealed, s.NullTime(st.ExpiresAt), st.Failure, s.D.Time(st.UpdatedAt))
}

// MintState returns the state of the secret name of box, or store.ErrNotFound.
func (s *Store) MintState(ctx context.Context, box, name string) (store.MintState, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("mint state of secret %q of box %q", name, box) },
		"SELECT name, of, sealed, expires_at, failure, updated_at FROM secret_mints WHERE box = $1 AND name = $2", scanMintState(box), box, name)
}

// ListMintStates returns the states of box's minted secrets, by name.
func (s *Store) ListMintStates(ctx context.Context, box string) ([]store.MintState, error) {
	return collect(ctx, s, fmt.Sprintf("list mint states of box %q", box),
		"SELECT name, of, sealed, expires_at, failure, updated_at FROM secret_mints WHERE box = $1 ORDER BY name"+s.D.Collate(),
		scanMintState(box), box)
}

// scanMintState scans the state of one of box's minted secrets.
func scanMintState(box string) func(r Scanner) (store.MintState, error) {
	return func(r Scanner) (store.MintState, error) {
		st := store.MintState{Box: box}
		err := r.Scan(&st.Name, &st.Of, &st.Sealed, Time(&st.ExpiresAt), &st.Failure, Time(&st.UpdatedAt))
		return st, err
	}
}
