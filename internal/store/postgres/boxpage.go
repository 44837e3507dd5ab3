package postgres

import (
	"context"
	"fmt"
	"strings"

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
	return s.Store.ListedPage(ctx, op, q, page, names, spends)
}
