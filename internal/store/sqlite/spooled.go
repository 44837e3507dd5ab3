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
	err = s.write(ctx, fmt.Sprintf("apply spooled batch %q", key), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "INSERT INTO spooled (key, at) VALUES (?, ?) ON CONFLICT DO NOTHING", key, micros(s.now()))
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return nil, err // applied before
		}
		for _, st := range settle {
			var one int
			err := tx.QueryRowContext(ctx, "SELECT 1 FROM boxes WHERE name = ?", st.Box).Scan(&one)
			if err == sql.ErrNoRows {
				continue // the box was removed since
			}
			if err != nil {
				return nil, err
			}
			if err := spendsql.Settle(ctx, spendTx{tx}, st); err != nil {
				return nil, err
			}
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
	})
	return applied, err
}
