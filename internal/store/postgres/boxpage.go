package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// ListBoxPage reads one page of boxes: one query picks the page's names
// (filtered, sorted and paged in SQL), and one query each reads their
// boxes, last reports and month, whatever the number of boxes.
func (s *Store) ListBoxPage(ctx context.Context, q store.BoxQuery) (store.BoxPage, error) {
	const op = "list box page"
	if err := q.Check(); err != nil {
		return store.BoxPage{}, fmt.Errorf("%s: %w", op, err)
	}
	like := store.LikeContains(strings.ToLower(q.Search))
	filter := ""
	if q.Search != "" {
		filter = `WHERE b.name LIKE $1 OR EXISTS (SELECT 1 FROM declarations d WHERE d.box = b.name
			AND lower(convert_from(d.doc, 'UTF8')::jsonb #>> '{listing,title}') LIKE $1)`
	}
	var page store.BoxPage
	if q.Count {
		count, cargs := "SELECT count(*) FROM boxes b", []any{}
		if filter != "" {
			count, cargs = count+" "+filter, []any{like}
		}
		if err := s.pool.QueryRow(ctx, count, cargs...).Scan(&page.Matched); err != nil {
			return store.BoxPage{}, translate(op, err)
		}
	}
	args := []any{like, q.Month}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	spend := "0::bigint"
	if q.Sort == store.BoxSortSpend {
		spend = "coalesce((SELECT sum(cost) FROM usage u WHERE u.box = b.name AND u.month = $2), 0)::bigint"
	}
	where, order := "", ""
	desc := map[bool]string{false: "", true: " DESC"}[q.Desc]
	lt := map[bool]string{false: ">", true: "<"}[q.Desc]
	switch {
	case q.Sort == store.BoxSortSpend:
		order = "spend" + desc + `, name COLLATE "C"`
		if q.After != nil {
			sp, n := arg(q.After.Spend), arg(q.After.Name)
			where = "WHERE spend " + lt + " " + sp + " OR (spend = " + sp + ` AND name COLLATE "C" > ` + n + ")"
		}
	default:
		order = `name COLLATE "C"` + desc
		if q.After != nil {
			where = `WHERE name COLLATE "C" ` + lt + " " + arg(q.After.Name)
		}
	}
	limit, offset := arg(q.Limit+1), arg(q.Offset)
	rows, err := s.pool.Query(ctx, `SELECT name, spend FROM (SELECT b.name AS name, `+spend+` AS spend, $1::text AS search, $2::text AS month
		FROM boxes b `+filter+`) p `+where+` ORDER BY `+order+` LIMIT `+limit+` OFFSET `+offset, args...)
	if err != nil {
		return store.BoxPage{}, translate(op, err)
	}
	var names []string
	var spends []int64
	var n string
	var sp int64
	if _, err := pgx.ForEachRow(rows, []any{&n, &sp}, func() error {
		names, spends = append(names, n), append(spends, sp)
		return nil
	}); err != nil {
		return store.BoxPage{}, translate(op, err)
	}
	names = page.Cut(q, names, spends)
	if len(names) == 0 {
		return page, nil
	}
	if page.Boxes, err = s.listedBoxes(ctx, names, q.Month); err != nil {
		return store.BoxPage{}, translate(op, err)
	}
	page.Boxes = slices.DeleteFunc(page.Boxes, func(b store.ListedBox) bool { return b.Box.Name == "" }) // removed meanwhile
	return page, nil
}

// listedBoxes reads the boxes named names, in that order, with their last
// reports and, when month is not "", their month.
func (s *Store) listedBoxes(ctx context.Context, names []string, month string) ([]store.ListedBox, error) {
	at := make(map[string]int, len(names))
	for i, n := range names {
		at[n] = i
	}
	out := make([]store.ListedBox, len(names))
	rows, err := s.pool.Query(ctx, "SELECT "+boxColumns+" FROM boxes WHERE name = ANY($1)", names)
	if err != nil {
		return nil, err
	}
	boxes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Box, error) { return scanBox(r) })
	if err != nil {
		return nil, err
	}
	for _, b := range boxes {
		out[at[b.Name]].Box = b
	}
	drows, err := s.pool.Query(ctx, "SELECT box, doc, at FROM declarations WHERE box = ANY($1)", names)
	if err != nil {
		return nil, err
	}
	var box string
	var doc []byte
	var when time.Time
	if _, err := pgx.ForEachRow(drows, []any{&box, &doc, &when}, func() error {
		out[at[box]].Declaration = &store.KeptDeclaration{Doc: append([]byte(nil), doc...), At: when.UTC()}
		return nil
	}); err != nil {
		return nil, err
	}
	if month == "" {
		return out, nil
	}
	mrows, err := s.pool.Query(ctx, `SELECT b.name,
		coalesce((SELECT sum(cost) FROM usage u WHERE u.box = b.name AND u.month = $1), 0)::bigint,
		coalesce((SELECT sum(calls) FROM usage u WHERE u.box = b.name AND u.month = $1), 0)::bigint,
		bu.limit_micros IS NOT NULL, coalesce(bu.limit_micros, 0),
		coalesce(t.spent, 0), coalesce(t.reserved, 0)
		FROM boxes b
		LEFT JOIN budgets bu ON bu.box = b.name AND bu.principal = ''
		LEFT JOIN tallies t ON t.box = b.name AND t.principal = '' AND t.month = $1
		WHERE b.name = ANY($2)`, month, names)
	if err != nil {
		return nil, err
	}
	var m store.BoxMonth
	_, err = pgx.ForEachRow(mrows, []any{&m.Box, &m.Measured, &m.Calls, &m.HasBudget, &m.Limit, &m.Spent, &m.Reserved}, func() error {
		out[at[m.Box]].Month = m
		return nil
	})
	return out, err
}

// FleetTotal sums month's usage and the boxes' own tallies.
func (s *Store) FleetTotal(ctx context.Context, month string) (store.MonthTotal, error) {
	const op = "fleet total"
	t := store.MonthTotal{}
	u := &t.Usage
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(unpriced), 0)::bigint, coalesce(sum(unmeasured), 0)::bigint,
		coalesce(sum(input_tokens), 0)::bigint, coalesce(sum(output_tokens), 0)::bigint, coalesce(sum(cache_write_tokens), 0)::bigint,
		coalesce(sum(cache_read_tokens), 0)::bigint, coalesce(sum(cost), 0)::bigint FROM usage WHERE month = $1`, month).
		Scan(&u.Calls, &u.Unpriced, &u.Unmeasured, &u.InputTokens, &u.OutputTokens, &u.CacheWriteTokens, &u.CacheReadTokens, &u.Cost)
	if err != nil {
		return store.MonthTotal{}, translate(op, err)
	}
	err = s.pool.QueryRow(ctx, "SELECT coalesce(sum(spent), 0)::bigint FROM tallies WHERE month = $1 AND principal = ''", month).Scan(&t.Charged)
	return t, translate(op, err)
}
