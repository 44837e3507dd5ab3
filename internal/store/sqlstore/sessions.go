package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// EndSession records that the owner's page session id has ended, to be
// refused until expires, and forgets the ended sessions whose expiry is
// before now. Sessions are never cached, so no change is recorded.
func (s *Store) EndSession(ctx context.Context, id string, expires, now time.Time) error {
	return s.Write(ctx, "end session", func(tx *sql.Tx) ([]store.Change, error) {
		if _, err := tx.ExecContext(ctx, "DELETE FROM ended_sessions WHERE expires_at < $1", s.D.Time(now)); err != nil {
			return nil, err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO ended_sessions (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
			id, s.D.Time(expires))
		return nil, err
	})
}

// SessionEnded reports whether the owner's page session id has ended.
func (s *Store) SessionEnded(ctx context.Context, id string) (bool, error) {
	var one int
	err := s.R.QueryRowContext(ctx, "SELECT 1 FROM ended_sessions WHERE id = $1", id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.D.Translate("session ended", err)
	}
	return true, nil
}
