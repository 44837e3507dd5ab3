package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// BoxActivity returns every box's audit counts since since, in one pass
// over the audit_at index's range.
func (s *Store) BoxActivity(ctx context.Context, since time.Time) ([]store.BoxActivity, error) {
	return collect(ctx, s, "box activity", `SELECT box, count(*),
		count(*) FILTER (WHERE reason <> '' AND reason NOT IN ($1, $2)),
		count(*) FILTER (WHERE reason IN ($3, $4) OR (reason = '' AND upstream_status >= 500)),
		max(at) FILTER (WHERE reason = ''),
		max(at) FILTER (WHERE reason <> '' AND replace(message, $5, '') <> message)
		FROM audit WHERE at >= $6 AND box <> '' AND capability <> $7 GROUP BY box ORDER BY box`+s.D.Collate(),
		func(r Scanner) (store.BoxActivity, error) {
			var a store.BoxActivity
			err := r.Scan(&a.Box, &a.Requests, &a.Refusals, &a.Upstream, Time(&a.LastServed), Time(&a.LastOverBudget))
			return a, err
		},
		store.ReasonUpstreamFailed, store.ReasonUpstreamUnusable, store.ReasonUpstreamFailed, store.ReasonUpstreamUnusable,
		store.BudgetSpentMarker, s.D.Time(since), store.ActorAdmin)
}

// AuditHours counts box's entries (every box's for "") per hour since since.
func (s *Store) AuditHours(ctx context.Context, box string, since time.Time) ([]store.HourCount, error) {
	q := `SELECT ` + s.D.Bucket("at", "hour") + ` AS h, count(*),
		count(*) FILTER (WHERE reason <> '' AND reason NOT IN ($1, $2)),
		count(*) FILTER (WHERE reason IN ($3, $4) OR (reason = '' AND upstream_status >= 500))
		FROM audit WHERE at >= $5 AND capability <> $6`
	args := []any{store.ReasonUpstreamFailed, store.ReasonUpstreamUnusable, store.ReasonUpstreamFailed, store.ReasonUpstreamUnusable,
		s.D.Time(since), store.ActorAdmin}
	if box != "" {
		q += " AND box = $7"
		args = append(args, box)
	}
	q += " GROUP BY h ORDER BY h"
	return collect(ctx, s, "audit hours", q, func(r Scanner) (store.HourCount, error) {
		var h store.HourCount
		err := r.Scan(Time(&h.Hour), &h.Requests, &h.Refusals, &h.Upstream)
		return h, err
	}, args...)
}

// RefusalGroups groups box's refusals since since by method, route,
// reason and message.
func (s *Store) RefusalGroups(ctx context.Context, box string, since time.Time, limit int) ([]store.RefusalGroup, error) {
	const op = "refusal groups"
	if limit <= 0 {
		return nil, fmt.Errorf("%s: limit %d is not positive", op, limit)
	}
	return collect(ctx, s, op, `SELECT method, route, reason, message, count(*), min(at), max(at) FROM audit
		WHERE box = $1 AND at >= $2 AND reason <> '' AND capability <> $3
		GROUP BY method, route, reason, message ORDER BY max(at) DESC, count(*) DESC LIMIT $4`,
		func(r Scanner) (store.RefusalGroup, error) {
			var g store.RefusalGroup
			err := r.Scan(&g.Method, &g.Route, &g.Reason, &g.Message, &g.Count, Time(&g.First), Time(&g.Last))
			return g, err
		},
		box, s.D.Time(since), store.ActorAdmin, limit)
}

// boxMonths selects each box's usage, own budget and own tally in month
// $1, as scanBoxMonth reads them; a caller adds its WHERE.
const boxMonths = `SELECT b.name,
		CAST(coalesce((SELECT sum(cost) FROM usage u WHERE u.box = b.name AND u.month = $1), 0) AS BIGINT),
		CAST(coalesce((SELECT sum(calls) FROM usage u WHERE u.box = b.name AND u.month = $1), 0) AS BIGINT),
		bu.limit_micros IS NOT NULL, coalesce(bu.limit_micros, 0),
		coalesce(t.spent, 0), coalesce(t.reserved, 0)
		FROM boxes b
		LEFT JOIN budgets bu ON bu.box = b.name AND bu.principal = ''
		LEFT JOIN tallies t ON t.box = b.name AND t.principal = '' AND t.month = $1`

func scanBoxMonth(r Scanner) (store.BoxMonth, error) {
	var m store.BoxMonth
	err := r.Scan(&m.Box, &m.Measured, &m.Calls, &m.HasBudget, &m.Limit, &m.Spent, &m.Reserved)
	return m, err
}

// SecretNames reads every box's secrets' names.
func (s *Store) SecretNames(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	return out, s.each(ctx, "secret names", "SELECT box, name FROM secrets ORDER BY box"+s.D.Collate()+", name"+s.D.Collate(), func(r Scanner) error {
		var box, name string
		err := r.Scan(&box, &name)
		out[box] = append(out[box], name)
		return err
	})
}

// AuditPage reads one page of box's entries, newest first.
func (s *Store) AuditPage(ctx context.Context, box string, offset, limit int) ([]store.AuditEntry, error) {
	const op = "audit page"
	if limit <= 0 || offset < 0 {
		return nil, fmt.Errorf("%s: limit %d or offset %d out of range", op, limit, offset)
	}
	return collect(ctx, s, op, "SELECT "+s.auditColumns()+" FROM audit WHERE box = $1 ORDER BY at DESC, id DESC LIMIT $2 OFFSET $3",
		scanAudit, box, limit, offset)
}

// FleetUsage reads every box's usage in month in one query.
func (s *Store) FleetUsage(ctx context.Context, month string) ([]store.Usage, error) {
	c := s.D.Collate()
	return collect(ctx, s, "fleet usage", "SELECT "+usageColumns+" FROM usage WHERE month = $1 ORDER BY box"+c+", payer_kind"+c+", principal"+c+", model"+c,
		scanUsage, month)
}

// FleetTallies reads every box's tallies in month in one query.
func (s *Store) FleetTallies(ctx context.Context, month string) ([]store.Tally, error) {
	return collect(ctx, s, "fleet tallies", "SELECT "+tallyColumns+" FROM tallies WHERE month = $1 ORDER BY box"+s.D.Collate()+", principal"+s.D.Collate(),
		scanTally, month)
}
