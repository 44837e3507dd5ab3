package sqlite

import (
	"context"
	"fmt"
	"slices"
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
	// Counted with the page when the search made every box be read anyway.
	matched := "0"
	if q.Count && q.Search != "" {
		matched = "count(*) OVER ()"
	} else if q.Count {
		if err := count(); err != nil {
			return store.BoxPage{}, translate(op, err)
		}
	}
	spend, join := "0", ""
	if q.Sort == store.BoxSortSpend {
		spend, join = "coalesce(u.spend, 0)", "LEFT JOIN (SELECT box, sum(cost) AS spend FROM usage WHERE month = ? GROUP BY box) u ON u.box = p.name"
		args = append(args, q.Month)
	}
	where, order := "", "name"
	desc := map[bool]string{false: "", true: " DESC"}[q.Desc]
	lt := map[bool]string{false: ">", true: "<"}[q.Desc]
	switch {
	case q.Sort == store.BoxSortSpend:
		order = "spend" + desc + ", name"
		if q.After != nil {
			where = "WHERE spend " + lt + " ? OR (spend = ? AND name > ?)"
			args = append(args, q.After.Spend, q.After.Spend, q.After.Name)
		}
	default:
		order = "name" + desc
		if q.After != nil {
			where = "WHERE name " + lt + " ?"
			args = append(args, q.After.Name)
		}
	}
	pargs := append(args, q.Limit+1, q.Offset)
	rows, err := s.r.QueryContext(ctx, `SELECT name, spend, matched FROM (SELECT p.name AS name, `+spend+` AS spend, `+matched+` AS matched
		FROM (`+src+`) p `+join+`) `+where+` ORDER BY `+order+` LIMIT ? OFFSET ?`, pargs...)
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
		if q.Count && q.Search != "" {
			page.Matched = int(matched)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return store.BoxPage{}, translate(op, err)
	}
	if q.Count && q.Search != "" && len(names) == 0 {
		if err := count(); err != nil { // past the end: no row counted
			return store.BoxPage{}, translate(op, err)
		}
	}
	if len(names) > q.Limit {
		names, spends = names[:q.Limit], spends[:q.Limit]
		c := store.BoxCursor{Name: names[q.Limit-1]}
		if q.Sort == store.BoxSortSpend {
			c.Spend = spends[q.Limit-1]
		}
		page.Next = &c
	}
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
	in := "(?" + strings.Repeat(", ?", len(names)-1) + ")"
	args := make([]any, len(names))
	at := make(map[string]int, len(names))
	for i, n := range names {
		args[i], at[n] = n, i
	}
	out := make([]store.ListedBox, len(names))
	rows, err := s.r.QueryContext(ctx, "SELECT "+boxColumns+" FROM boxes WHERE name IN "+in, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		b, err := scanBox(rows)
		if err != nil {
			return nil, err
		}
		out[at[b.Name]].Box = b
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	drows, err := s.r.QueryContext(ctx, "SELECT box, doc, at FROM declarations WHERE box IN "+in, args...)
	if err != nil {
		return nil, err
	}
	defer drows.Close()
	for drows.Next() {
		var box string
		var doc []byte
		var when int64
		if err := drows.Scan(&box, &doc, &when); err != nil {
			return nil, err
		}
		out[at[box]].Declaration = &store.KeptDeclaration{Doc: doc, At: fromMicros(when)}
	}
	if err := drows.Err(); err != nil {
		return nil, err
	}
	drows.Close()
	if month == "" {
		return out, nil
	}
	margs := append([]any{month, month, month}, args...)
	mrows, err := s.r.QueryContext(ctx, `SELECT b.name,
		coalesce((SELECT sum(cost) FROM usage u WHERE u.box = b.name AND u.month = ?), 0),
		coalesce((SELECT sum(calls) FROM usage u WHERE u.box = b.name AND u.month = ?), 0),
		bu.limit_micros IS NOT NULL, coalesce(bu.limit_micros, 0),
		coalesce(t.spent, 0), coalesce(t.reserved, 0)
		FROM boxes b
		LEFT JOIN budgets bu ON bu.box = b.name AND bu.principal = ''
		LEFT JOIN tallies t ON t.box = b.name AND t.principal = '' AND t.month = ?
		WHERE b.name IN `+in, margs...)
	if err != nil {
		return nil, err
	}
	defer mrows.Close()
	for mrows.Next() {
		var m store.BoxMonth
		if err := mrows.Scan(&m.Box, &m.Measured, &m.Calls, &m.HasBudget, &m.Limit, &m.Spent, &m.Reserved); err != nil {
			return nil, err
		}
		out[at[m.Box]].Month = m
	}
	return out, mrows.Err()
}
