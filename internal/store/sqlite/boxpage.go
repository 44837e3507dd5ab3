package sqlite

import (
	"context"
	"fmt"
	"strings"

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
	var page store.BoxPage
	count := func() error {
		return s.r.QueryRowContext(ctx, "SELECT count(*) FROM ("+src+")", args...).Scan(&page.Matched)
	}
	desc := map[bool]string{false: "", true: " DESC"}[q.Desc]
	lt := map[bool]string{false: ">", true: "<"}[q.Desc]
	var query string
	var qargs []any
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
		query = `SELECT name, spend, 0 FROM (
			SELECT * FROM (SELECT * FROM (SELECT box AS name, sum(cost) AS spend FROM usage WHERE month = ? GROUP BY box HAVING spend > 0)
				WHERE true ` + within + ` ` + after + ` ORDER BY spend` + desc + `, name LIMIT ?)
			UNION ALL
			SELECT * FROM (SELECT * FROM (SELECT name, 0 AS spend FROM boxes b WHERE NOT EXISTS (SELECT 1 FROM usage u WHERE u.box = b.name AND u.month = ? AND u.cost > 0))
				WHERE true ` + within + ` ` + after + ` ORDER BY name LIMIT ?)
			) ORDER BY spend` + desc + `, name LIMIT ? OFFSET ?`
		qargs = append(qargs, q.Month)
		qargs = append(qargs, wargs...)
		qargs = append(qargs, aargs...)
		qargs = append(qargs, need, q.Month)
		qargs = append(qargs, wargs...)
		qargs = append(qargs, aargs...)
		qargs = append(qargs, need, q.Limit+1, q.Offset)
		if q.Count {
			if err := count(); err != nil {
				return store.BoxPage{}, translate(op, err)
			}
		}
	} else {
		// Counted with the page when the search made every box be read
		// anyway.
		matched := "0"
		if q.Count && q.Search != "" {
			matched = "count(*) OVER ()"
		} else if q.Count {
			if err := count(); err != nil {
				return store.BoxPage{}, translate(op, err)
			}
		}
		where := ""
		qargs = args
		if q.After != nil {
			where = "WHERE name " + lt + " ?"
			qargs = append(qargs, q.After.Name)
		}
		query = `SELECT name, 0, matched FROM (SELECT name, ` + matched + ` AS matched FROM (` + src + `)) ` + where +
			` ORDER BY name` + desc + ` LIMIT ? OFFSET ?`
		qargs = append(qargs, q.Limit+1, q.Offset)
	}
	rows, err := s.r.QueryContext(ctx, query, qargs...)
	if err != nil {
		return store.BoxPage{}, translate(op, err)
	}
	var names []string
	var spends []int64
	for rows.Next() {
		var n string
		var sp, matched int64
		if err := rows.Scan(&n, &sp, &matched); err != nil {
			rows.Close()
			return store.BoxPage{}, translate(op, err)
		}
		names, spends = append(names, n), append(spends, sp)
		if q.Count && q.Search != "" && q.Sort != store.BoxSortSpend {
			page.Matched = int(matched)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return store.BoxPage{}, translate(op, err)
	}
	if q.Count && q.Search != "" && q.Sort != store.BoxSortSpend && len(names) == 0 {
		if err := count(); err != nil { // past the end: no row counted
			return store.BoxPage{}, translate(op, err)
		}
	}
	return s.Store.ListedPage(ctx, op, q, page, names, spends)
}
