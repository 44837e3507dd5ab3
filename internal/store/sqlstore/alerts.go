package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// MarkAlert records a once; see store.Alerts.
func (s *Store) MarkAlert(ctx context.Context, a store.BudgetAlert) (bool, error) {
	var n int64
	err := s.Write(ctx, fmt.Sprintf("record budget alert of box %q", a.Box), func(tx *sql.Tx) ([]store.Change, error) {
		var err error
		n, err = affected(ctx, tx, `INSERT INTO budget_alerts (box, principal, win, period, threshold, limit_micros, spent, at_micros)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
			a.Box, a.Principal, a.Window, a.Period, a.Threshold, a.Limit, a.Spent, a.At.UnixMicro())
		return nil, err
	})
	return n == 1, err
}

// ListAlerts returns box's alerts, newest first.
func (s *Store) ListAlerts(ctx context.Context, box string, limit int) ([]store.BudgetAlert, error) {
	return collect(ctx, s, fmt.Sprintf("list budget alerts of box %q", box), `SELECT principal, win, period, threshold, limit_micros, spent, at_micros FROM budget_alerts
		WHERE box = $1 ORDER BY at_micros DESC LIMIT $2`, func(r Scanner) (store.BudgetAlert, error) {
		a := store.BudgetAlert{Box: box}
		err := r.Scan(&a.Principal, &a.Window, &a.Period, &a.Threshold, &a.Limit, &a.Spent, Time(&a.At))
		return a, err
	}, box, limit)
}
