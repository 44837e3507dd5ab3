package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// MarkAlert records a once; see store.Alerts.
func (s *Store) MarkAlert(ctx context.Context, a store.BudgetAlert) (bool, error) {
	var n int64
	err := s.write(ctx, fmt.Sprintf("record budget alert of box %q", a.Box), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, `INSERT INTO budget_alerts (box, principal, win, period, threshold, limit_micros, spent, at_micros)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
			a.Box, a.Principal, a.Window, a.Period, a.Threshold, a.Limit, a.Spent, a.At.UnixMicro())
		n = tag.RowsAffected()
		return nil, err
	})
	return n == 1, err
}

// ListAlerts returns box's alerts, newest first.
func (s *Store) ListAlerts(ctx context.Context, box string, limit int) ([]store.BudgetAlert, error) {
	op := fmt.Sprintf("list budget alerts of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT principal, win, period, threshold, limit_micros, spent, at_micros FROM budget_alerts
		WHERE box = $1 ORDER BY at_micros DESC LIMIT $2`, box, limit)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.BudgetAlert, error) {
		a := store.BudgetAlert{Box: box}
		var at int64
		err := r.Scan(&a.Principal, &a.Window, &a.Period, &a.Threshold, &a.Limit, &a.Spent, &at)
		a.At = time.UnixMicro(at).UTC()
		return a, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
