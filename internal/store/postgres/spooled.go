package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/spendsql"
)

// ApplySpooled writes one spooled batch under key, once; see
// store.Spooled.
func (s *Store) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	applied := false
	err := s.write(ctx, fmt.Sprintf("apply spooled batch %q", key), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, "INSERT INTO spooled (key, at) VALUES ($1, $2) ON CONFLICT DO NOTHING", key, time.Now().UTC())
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, nil // applied before
		}
		// A settlement of a box removed since is skipped.
		if err := spendsql.SettleMany(ctx, spendTx{tx}, settle); err != nil {
			return nil, err
		}
		if len(audit) > 0 {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit"}, auditColumns, &auditRows{entries: audit, i: -1}); err != nil {
				return nil, err
			}
		}
		// Keys older than any spool still replayed are forgotten.
		if _, err := tx.Exec(ctx, "DELETE FROM spooled WHERE at < $1", time.Now().Add(-store.SpooledKeep).UTC()); err != nil {
			return nil, err
		}
		applied = true
		return nil, nil
	})
	return applied, err
}
