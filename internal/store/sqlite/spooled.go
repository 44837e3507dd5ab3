package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/spendsql"
)

// ApplySpooled writes one spooled batch under key, once; see
// store.Spooled.
func (s *Store) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	applied := false
	ins, err := s.auditInserter(ctx, len(audit))
	if err != nil {
		return false, translate(fmt.Sprintf("apply spooled batch %q", key), err)
	}
	// Made with concurrent reservations and settlements, in one
	// transaction (see grouped).
	err = s.grouped(ctx, fmt.Sprintf("apply spooled batch %q", key), func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "INSERT INTO spooled (key, at) VALUES (?, ?) ON CONFLICT DO NOTHING", key, micros(s.now()))
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return nil, err // applied before
		}
		// A settlement of a box removed since is skipped.
		if err := spendsql.SettleMany(ctx, s.SpendTx(tx), settle); err != nil {
			return nil, err
		}
		if err := ins.insert(ctx, tx, audit); err != nil {
			return nil, err
		}
		// Keys older than any spool still replayed are forgotten.
		if _, err := tx.ExecContext(ctx, "DELETE FROM spooled WHERE at < ?", micros(s.now().Add(-store.SpooledKeep))); err != nil {
			return nil, err
		}
		applied = true
		return nil, nil
	}, nil)
	if err != nil {
		// applied is not read: the group may still be writing it.
		return false, err
	}
	return applied, nil
}
