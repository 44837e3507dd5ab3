package postgres

import (
	"fmt"
	"strings"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// BoxPage searches a report's listing title as jsonb, and sorts by the
// month's spend summed for each box.
func (dialect) BoxPage(q store.BoxQuery) sqlstore.BoxPageQuery {
	like := store.LikeContains(strings.ToLower(q.Search))
	filter := ""
	if q.Search != "" {
		filter = `WHERE b.name LIKE $1 OR EXISTS (SELECT 1 FROM declarations d WHERE d.box = b.name
			AND lower(convert_from(d.doc, 'UTF8')::jsonb #>> '{listing,title}') LIKE $1)`
	}
	b := sqlstore.BoxPageQuery{Count: "SELECT count(*) FROM boxes b"}
	if filter != "" {
		b.Count, b.CountArgs = b.Count+" "+filter, []any{like}
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
	b.Page = `SELECT name, spend, 0 FROM (SELECT b.name AS name, ` + spend + ` AS spend, $1::text AS search, $2::text AS month
		FROM boxes b ` + filter + `) p ` + where + ` ORDER BY ` + order + ` LIMIT ` + limit + ` OFFSET ` + offset
	b.Args = args
	return b
}
