package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// SetMintState creates or replaces the state of a minted secret;
// store.ErrNotFound if there is no such secret. It is never cached, so
// no change is recorded.
func (s *Store) SetMintState(ctx context.Context, st store.MintState) error {
	return s.write(ctx, fmt.Sprintf("set mint state of secret %q of box %q", st.Name, st.Box), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO secret_mints (box, name, of, sealed, expires_at, failure, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (box, name) DO UPDATE SET of = excluded.of, sealed = excluded.sealed, expires_at = excluded.expires_at,
			failure = excluded.failure, updated_at = excluded.updated_at`,
			st.Box, st.Name, st.Of, st.Sealed, nullMicros(st.ExpiresAt), st.Failure, micros(st.UpdatedAt))
		return nil, err
	})
}

// MintState returns the state of the secret name of box, or store.ErrNotFound.
func (s *Store) MintState(ctx context.Context, box, name string) (store.MintState, error) {
	st := store.MintState{Box: box, Name: name}
	var exp sql.NullInt64
	var at int64
	err := s.r.QueryRowContext(ctx, "SELECT of, sealed, expires_at, failure, updated_at FROM secret_mints WHERE box = ? AND name = ?", box, name).
		Scan(&st.Of, &st.Sealed, &exp, &st.Failure, &at)
	if err != nil {
		return store.MintState{}, translate(fmt.Sprintf("mint state of secret %q of box %q", name, box), err)
	}
	st.ExpiresAt, st.UpdatedAt = fromNullMicros(exp), fromMicros(at)
	return st, nil
}

// ListMintStates returns the states of box's minted secrets, by name.
func (s *Store) ListMintStates(ctx context.Context, box string) ([]store.MintState, error) {
	op := fmt.Sprintf("list mint states of box %q", box)
	rows, err := s.r.QueryContext(ctx, "SELECT name, of, sealed, expires_at, failure, updated_at FROM secret_mints WHERE box = ? ORDER BY name", box)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.MintState
	for rows.Next() {
		st := store.MintState{Box: box}
		var exp sql.NullInt64
		var at int64
		if err := rows.Scan(&st.Name, &st.Of, &st.Sealed, &exp, &st.Failure, &at); err != nil {
			return nil, translate(op, err)
		}
		st.ExpiresAt, st.UpdatedAt = fromNullMicros(exp), fromMicros(at)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
