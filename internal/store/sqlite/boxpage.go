package sqlite

import (
	"slices"
	"strings"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// BoxPage searches a report's listing title with json_extract, and sorts
// by spend without sorting every box.
func (dialect) BoxPage(q store.BoxQuery) sqlstore.BoxPageQuery {
	// src is the boxes the search keeps. A listing title is read from a
	// report only where the report's text holds the search, where the
	// search is one JSON writes as it is.
	src, args := "SELECT name FROM boxes", []any{}
	if q.Search != "" {
		like := store.LikeContains(strings.ToLower(q.Search))
		// LIKE matches letters A to Z in either case.
		pre := ""
		args = []any{like}
		if plainJSON(q.Search) {
			pre, args = `CAST(doc AS TEXT) LIKE ? ESCAPE '\' AND `, append(args, like)
		}
		src = `SELECT name FROM boxes WHERE name LIKE ? ESCAPE '\'
			UNION SELECT box FROM declarations WHERE ` + pre + `json_extract(CAST(doc AS TEXT), '$.listing.title') LIKE ? ESCAPE '\'`
		args = append(args, like)
	}
	b := sqlstore.BoxPageQuery{Count: "SELECT count(*) FROM (" + src + ")", CountArgs: args}
	desc := map[bool]string{false: "", true: " DESC"}[q.Desc]
	lt := map[bool]string{false: ">", true: "<"}[q.Desc]
	if q.Sort == store.BoxSortSpend {
		// The boxes that spent this month, from the month's usage, and
		// the others by name, each cut to what the page can need before
		// the two are sorted together: no sort of every box.
		after, aargs := "", []any{}
		if q.After != nil {
			after = "AND (spend " + lt + " ? OR (spend = ? AND name > ?))"
			aargs = []any{q.After.Spend, q.After.Spend, q.After.Name}
		}
		within, wargs := "", []any{}
		if q.Search != "" {
			within, wargs = "AND name IN ("+src+")", args
		}
		need := q.Limit + 1 + q.Offset
		b.Page = `SELECT name, spend, 0 FROM (
			SELECT * FROM (SELECT * FROM (SELECT box AS name, sum(cost) AS spend FROM usage WHERE month = ? GROUP BY box HAVING spend > 0)
				WHERE true ` + within + ` ` + after + ` ORDER BY spend` + desc + `, name LIMIT ?)
			UNION ALL
			SELECT * FROM (SELECT * FROM (SELECT name, 0 AS spend FROM boxes b WHERE NOT EXISTS (SELECT 1 FROM usage u WHERE u.box = b.name AND u.month = ? AND u.cost > 0))
				WHERE true ` + within + ` ` + after + ` ORDER BY name LIMIT ?)
			) ORDER BY spend` + desc + `, name LIMIT ? OFFSET ?`
		b.Args = slices.Concat([]any{q.Month}, wargs, aargs, []any{need, q.Month}, wargs, aargs, []any{need, q.Limit + 1, q.Offset})
		return b
	}
	// Counted with the page when the search makes every box be read
	// anyway.
	matched := "0"
	if q.Count && q.Search != "" {
		matched, b.Counted = "count(*) OVER ()", true
	}
	where := ""
	b.Args = append(b.Args, args...)
	if q.After != nil {
		where = "WHERE name " + lt + " ?"
		b.Args = append(b.Args, q.After.Name)
	}
	b.Page = `SELECT name, 0, matched FROM (SELECT name, ` + matched + ` AS matched FROM (` + src + `)) ` + where +
		` ORDER BY name` + desc + ` LIMIT ? OFFSET ?`
	b.Args = append(b.Args, q.Limit+1, q.Offset)
	return b
}
