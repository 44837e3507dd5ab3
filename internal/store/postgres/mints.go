package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// SetMintState creates or replaces the state of a minted secret;
// store.ErrNotFound if there is no such secret. It is never cached, so
// no change is recorded.
func (s *Store) SetMintState(ctx context.Context, st store.MintState) error {
	return s.write(ctx, fmt.Sprintf("set mint state of secret %q of box %q", st.Name, st.Box), func(tx pgx.Tx) ([]store.Change, error) {
		_, err := tx.Exec(ctx, `INSERT INTO secret_mints (box, name, of, sealed, expires_at, failure, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (box, name) DO UPDATE SET of = excluded.of, sealed = excluded.sealed, expires_at = excluded.expires_at,
			failure = excluded.failure, updated_at = excluded.updated_at`,
			st.Box, st.Name, st.Of, st.Sealed, nullTime(st.ExpiresAt), st.Failure, st.UpdatedAt)
		return nil, err
	})
}

// MintState returns the state of the secret name of box, or store.ErrNotFound.
func (s *Store) MintState(ctx context.Context, box, name string) (store.MintState, error) {
	st := store.MintState{Box: box, Name: name}
	var exp *time.Time
	err := s.pool.QueryRow(ctx, "SELECT of, sealed, expires_at, failure, updated_at FROM secret_mints WHERE box = $1 AND name = $2", box, name).
		Scan(&st.Of, &st.Sealed, &exp, &st.Failure, &st.UpdatedAt)
	if err != nil {
		return store.MintState{}, translate(fmt.Sprintf("mint state of secret %q of box %q", name, box), err)
	}
	st.ExpiresAt, st.UpdatedAt = fromNullTime(exp), st.UpdatedAt.UTC()
	return st, nil
}

// ListMintStates returns the states of box's minted secrets, by name.
func (s *Store) ListMintStates(ctx context.Context, box string) ([]store.MintState, error) {
	op := fmt.Sprintf("list mint states of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT name, of, sealed, expires_at, failure, updated_at FROM secret_mints WHERE box = $1 ORDER BY name COLLATE "C"`, box)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.MintState, error) {
		st := store.MintState{Box: box}
		var exp *time.Time
		err := r.Scan(&st.Name, &st.Of, &st.Sealed, &exp, &st.Failure, &st.UpdatedAt)
		st.ExpiresAt, st.UpdatedAt = fromNullTime(exp), st.UpdatedAt.UTC()
		return st, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
