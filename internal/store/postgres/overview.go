package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// BoxActivity returns every box's audit counts since since, in one pass
// over the audit_at index's range.
func (s *Store) BoxActivity(ctx context.Context, since time.Time) ([]store.BoxActivity, error) {
	const op = "box activity"
	rows, err := s.pool.Query(ctx, `SELECT box, count(*),
		count(*) FILTER (WHERE reason <> '' AND reason NOT IN ($4, $5)),
		count(*) FILTER (WHERE reason IN ($4, $5) OR (reason = '' AND upstream_status >= 500)),
		max(at) FILTER (WHERE reason = ''),
		max(at) FILTER (WHERE reason <> '' AND strpos(message, $1) > 0)
		FROM audit WHERE at >= $2 AND box <> '' AND capability <> $3 GROUP BY box ORDER BY box COLLATE "C"`,
		store.BudgetSpentMarker, since, store.ActorAdmin, store.ReasonUpstreamFailed, store.ReasonUpstreamUnusable)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.BoxActivity, error) {
		var a store.BoxActivity
		var served, over *time.Time
		err := r.Scan(&a.Box, &a.Requests, &a.Refusals, &a.Upstream, &served, &over)
		if served != nil {
			a.LastServed = served.UTC()
		}
		if over != nil {
			a.LastOverBudget = over.UTC()
		}
		return a, err
	})
	return out, translate(op, err)
}

// AuditHours counts box's entries (every box's for "") per hour since since.
func (s *Store) AuditHours(ctx context.Context, box string, since time.Time) ([]store.HourCount, error) {
	const op = "audit hours"
	q := `SELECT date_trunc('hour', at AT TIME ZONE 'UTC') AS h, count(*),
		count(*) FILTER (WHERE reason <> '' AND reason NOT IN ($3, $4)),
		count(*) FILTER (WHERE reason IN ($3, $4) OR (reason = '' AND upstream_status >= 500))
		FROM audit WHERE at >= $1 AND capability <> $2`
	args := []any{since, store.ActorAdmin, store.ReasonUpstreamFailed, store.ReasonUpstreamUnusable}
	if box != "" {
		q += " AND box = $5"
		args = append(args, box)
	}
	q += " GROUP BY h ORDER BY h"
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.HourCount, error) {
		var h store.HourCount
		var t time.Time
		err := r.Scan(&t, &h.Requests, &h.Refusals, &h.Upstream)
		h.Hour = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, time.UTC)
		return h, err
	})
	return out, translate(op, err)
}

// RefusalGroups groups box's refusals since since by method, route,
// reason and message.
func (s *Store) RefusalGroups(ctx context.Context, box string, since time.Time, limit int) ([]store.RefusalGroup, error) {
	const op = "refusal groups"
	if limit <= 0 {
		return nil, fmt.Errorf("%s: limit %d is not positive", op, limit)
	}
	rows, err := s.pool.Query(ctx, `SELECT method, route, reason, message, count(*), min(at), max(at) FROM audit
		WHERE box = $1 AND at >= $2 AND reason <> '' AND capability <> $3
		GROUP BY method, route, reason, message ORDER BY max(at) DESC, count(*) DESC LIMIT $4`,
		box, since, store.ActorAdmin, limit)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.RefusalGroup, error) {
		var g store.RefusalGroup
		err := r.Scan(&g.Method, &g.Route, &g.Reason, &g.Message, &g.Count, &g.First, &g.Last)
		g.First, g.Last = g.First.UTC(), g.Last.UTC()
		return g, err
	})
	return out, translate(op, err)
}

// MonthOverview reads every box's usage, own budget and own tally for
// month in one query.
func (s *Store) MonthOverview(ctx context.Context, month string) ([]store.BoxMonth, error) {
	const op = "month overview"
	rows, err := s.pool.Query(ctx, `SELECT b.name,
		coalesce((SELECT sum(cost) FROM usage u WHERE u.box = b.name AND u.month = $1), 0)::bigint,
		coalesce((SELECT sum(calls) FROM usage u WHERE u.box = b.name AND u.month = $1), 0)::bigint,
		bu.limit_micros IS NOT NULL, coalesce(bu.limit_micros, 0),
		coalesce(t.spent, 0), coalesce(t.reserved, 0)
		FROM boxes b
		LEFT JOIN budgets bu ON bu.box = b.name AND bu.principal = ''
		LEFT JOIN tallies t ON t.box = b.name AND t.principal = '' AND t.month = $1
		ORDER BY b.name COLLATE "C"`, month)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.BoxMonth, error) {
		var m store.BoxMonth
		err := r.Scan(&m.Box, &m.Measured, &m.Calls, &m.HasBudget, &m.Limit, &m.Spent, &m.Reserved)
		return m, err
	})
	return out, translate(op, err)
}

// AllDeclarations reads every box's last report.
func (s *Store) AllDeclarations(ctx context.Context) (map[string]store.KeptDeclaration, error) {
	const op = "all declarations"
	rows, err := s.pool.Query(ctx, "SELECT box, doc, at FROM declarations")
	if err != nil {
		return nil, translate(op, err)
	}
	out := map[string]store.KeptDeclaration{}
	var box string
	var doc []byte
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&box, &doc, &at}, func() error {
		out[box] = store.KeptDeclaration{Doc: append([]byte(nil), doc...), At: at.UTC()}
		return nil
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// SecretNames reads every box's secrets' names.
func (s *Store) SecretNames(ctx context.Context) (map[string][]string, error) {
	const op = "secret names"
	rows, err := s.pool.Query(ctx, `SELECT box, name FROM secrets ORDER BY box COLLATE "C", name COLLATE "C"`)
	if err != nil {
		return nil, translate(op, err)
	}
	out := map[string][]string{}
	var box, name string
	_, err = pgx.ForEachRow(rows, []any{&box, &name}, func() error {
		out[box] = append(out[box], name)
		return nil
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// AuditPage reads one page of box's entries, newest first.
func (s *Store) AuditPage(ctx context.Context, box string, offset, limit int) ([]store.AuditEntry, error) {
	const op = "audit page"
	if limit <= 0 || offset < 0 {
		return nil, fmt.Errorf("%s: limit %d or offset %d out of range", op, limit, offset)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, box, at, method, route, capability, words, status, reason, message, duration_us, upstream_status, bytes, cost_micros
		FROM audit WHERE box = $1 ORDER BY at DESC, id DESC LIMIT $2 OFFSET $3`, box, limit, offset)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AuditEntry, error) {
		var e store.AuditEntry
		var dur int64
		err := r.Scan(&e.ID, &e.Box, &e.At, &e.Method, &e.Route, &e.Capability, &e.Words, &e.Status, &e.Reason, &e.Message, &dur, &e.UpstreamStatus, &e.Bytes, &e.Cost)
		e.At = e.At.UTC()
		e.Duration = time.Duration(dur) * time.Microsecond
		if len(e.Words) == 0 {
			e.Words = nil
		}
		return e, err
	})
	return out, translate(op, err)
}

// FleetUsage reads every box's usage in month in one query.
func (s *Store) FleetUsage(ctx context.Context, month string) ([]store.Usage, error) {
	const op = "fleet usage"
	rows, err := s.pool.Query(ctx, `SELECT box, payer_kind, principal, model, calls, unpriced, unmeasured,
			input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost
		FROM usage WHERE month = $1
		ORDER BY box COLLATE "C", payer_kind COLLATE "C", principal COLLATE "C", model COLLATE "C"`, month)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Usage, error) {
		u := store.Usage{Month: month}
		err := r.Scan(&u.Box, &u.PayerKind, &u.Principal, &u.Model, &u.Calls, &u.Unpriced, &u.Unmeasured,
			&u.InputTokens, &u.OutputTokens, &u.CacheWriteTokens, &u.CacheReadTokens, &u.Cost)
		return u, err
	})
	return out, translate(op, err)
}

// FleetTallies reads every box's tallies in month in one query.
func (s *Store) FleetTallies(ctx context.Context, month string) ([]store.Tally, error) {
	const op = "fleet tallies"
	rows, err := s.pool.Query(ctx, `SELECT box, principal, spent, reserved FROM tallies WHERE month = $1
		ORDER BY box COLLATE "C", principal COLLATE "C"`, month)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Tally, error) {
		t := store.Tally{Month: month}
		err := r.Scan(&t.Box, &t.Principal, &t.Spent, &t.Reserved)
		return t, err
	})
	return out, translate(op, err)
}
