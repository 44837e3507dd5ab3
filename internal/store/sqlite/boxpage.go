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
	filter, fargs := "", []any{}
	if q.Search != "" {
		like := store.LikeContains(strings.ToLower(q.Search))
		filter = `WHERE b.name LIKE ? ESCAPE '\' OR EXISTS (SELECT 1 FROM declarations d WHERE d.box = b.name
			AND lower(json_extract(CAST(d.doc AS TEXT), '$.listing.title')) LIKE ? ESCAPE '\')`
		fargs = []any{like, like}
	}
	var page store.BoxPage
	if q.Count {
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM boxes b `+filter, fargs...).Scan(&page.Matched); err != nil {
			return store.BoxPage{}, translate(op, err)
		}
	}
	spend, args := "0", []any{}
	if q.Sort == store.BoxSortSpend {
		spend, args = "coalesce((SELECT sum(cost) FROM usage u WHERE u.box = b.name AND u.month = ?), 0)", append(args, q.Month)
	}
	args = append(args, fargs...)
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
	args = append(args, q.Limit+1, q.Offset)
	rows, err := s.r.QueryContext(ctx, `SELECT name, spend FROM (SELECT b.name AS name, `+spend+` AS spend
		FROM boxes b `+filter+`) `+where+` ORDER BY `+order+` LIMIT ? OFFSET ?`, args...)
	if err != nil {
		return store.BoxPage{}, translate(op, err)
	}
	var names []string
	var spends []int64
	for rows.Next() {
		var n string
		var sp int64
		if err := rows.Scan(&n, &sp); err != nil {
			rows.Close()
			return store.BoxPage{}, translate(op, err)
		}
		names, spends = append(names, n), append(spends, sp)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return store.BoxPage{}, translate(op, err)
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
