package sqlstore

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/store"
)

// ListedPage ends a ListBoxPage once a dialect's query has picked the
// page's names (and their spends, for a sort by spend): it cuts the page
// and its cursor (store.BoxPage.Cut), and reads the kept names' boxes,
// last reports and month, one query each, whatever the number of boxes.
// A box removed meanwhile is left out. Errors are translated, prefixed
// with op.
func (s *Store) ListedPage(ctx context.Context, op string, q store.BoxQuery, page store.BoxPage, names []string, spends []int64) (store.BoxPage, error) {
	names = page.Cut(q, names, spends)
	if len(names) == 0 {
		return page, nil
	}
	var err error
	if page.Boxes, err = s.listedBoxes(ctx, names, q.Month); err != nil {
		return store.BoxPage{}, s.D.Translate(op, err)
	}
	page.Boxes = slices.DeleteFunc(page.Boxes, func(b store.ListedBox) bool { return b.Box.Name == "" }) // removed meanwhile
	return page, nil
}

// in is the list ($from, $from+1, ...) of n placeholders.
func in(from, n int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(from+i))
	}
	b.WriteByte(')')
	return b.String()
}

// listedBoxes reads the boxes named names, in that order, with their last
// reports and, when month is not "", their month.
func (s *Store) listedBoxes(ctx context.Context, names []string, month string) ([]store.ListedBox, error) {
	args := make([]any, len(names))
	at := make(map[string]int, len(names))
	for i, n := range names {
		args[i], at[n] = n, i
	}
	out := make([]store.ListedBox, len(names))
	rows, err := s.R.QueryContext(ctx, "SELECT "+boxColumns+" FROM boxes WHERE name IN "+in(1, len(names)), args...)
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
	drows, err := s.R.QueryContext(ctx, "SELECT box, doc, at FROM declarations WHERE box IN "+in(1, len(names)), args...)
	if err != nil {
		return nil, err
	}
	defer drows.Close()
	for drows.Next() {
		var box string
		d := &store.KeptDeclaration{}
		if err := drows.Scan(&box, &d.Doc, Time(&d.At)); err != nil {
			return nil, err
		}
		out[at[box]].Declaration = d
	}
	if err := drows.Err(); err != nil {
		return nil, err
	}
	drows.Close()
	if month == "" {
		return out, nil
	}
	margs := append([]any{month}, args...)
	mrows, err := s.R.QueryContext(ctx, `SELECT b.name,
		CAST(coalesce((SELECT sum(cost) FROM usage u WHERE u.box = b.name AND u.month = $1), 0) AS BIGINT),
		CAST(coalesce((SELECT sum(calls) FROM usage u WHERE u.box = b.name AND u.month = $1), 0) AS BIGINT),
		bu.limit_micros IS NOT NULL, coalesce(bu.limit_micros, 0),
		coalesce(t.spent, 0), coalesce(t.reserved, 0)
		FROM boxes b
		LEFT JOIN budgets bu ON bu.box = b.name AND bu.principal = ''
		LEFT JOIN tallies t ON t.box = b.name AND t.principal = '' AND t.month = $1
		WHERE b.name IN `+in(2, len(names)), margs...)
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

// FleetTotal sums month's usage and the boxes' own tallies.
func (s *Store) FleetTotal(ctx context.Context, month string) (store.MonthTotal, error) {
	const op = "fleet total"
	t := store.MonthTotal{}
	u := &t.Usage
	err := s.R.QueryRowContext(ctx, `SELECT CAST(coalesce(sum(calls), 0) AS BIGINT), CAST(coalesce(sum(unpriced), 0) AS BIGINT),
		CAST(coalesce(sum(unmeasured), 0) AS BIGINT), CAST(coalesce(sum(input_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(output_tokens), 0) AS BIGINT), CAST(coalesce(sum(cache_write_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(cache_read_tokens), 0) AS BIGINT), CAST(coalesce(sum(cost), 0) AS BIGINT) FROM usage WHERE month = $1`, month).
		Scan(&u.Calls, &u.Unpriced, &u.Unmeasured, &u.InputTokens, &u.OutputTokens, &u.CacheWriteTokens, &u.CacheReadTokens, &u.Cost)
	if err != nil {
		return store.MonthTotal{}, s.D.Translate(op, err)
	}
	err = s.R.QueryRowContext(ctx, "SELECT CAST(coalesce(sum(spent), 0) AS BIGINT) FROM tallies WHERE month = $1 AND principal = ''", month).Scan(&t.Charged)
	return t, s.D.Translate(op, err)
}
