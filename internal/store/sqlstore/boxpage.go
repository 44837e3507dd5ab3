package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/store"
)

// BoxPageQuery is the query that picks a page of boxes, as a dialect
// writes it (Dialect.BoxPage).
type BoxPageQuery struct {
	// Page selects the name, the spend (0 unless the sort is by spend)
	// and, when Counted, how many boxes match, of up to q.Limit+1 boxes
	// from q.Offset in the page's order; Args are its arguments.
	Page string
	Args []any
	// Counted says Page's rows count the boxes that match.
	Counted bool
	// Count counts the boxes that match, with CountArgs, for a q.Count
	// that Page's rows do not answer (none counted, or none past the end).
	Count     string
	CountArgs []any
}

// ListBoxPage reads one page of boxes: one query picks the page's names
// (filtered, sorted and paged in SQL, as the dialect writes it), and one
// query each reads their boxes, last reports and month, whatever the
// number of boxes. The page and its cursor are cut by
// store.BoxPage.Cut; a box removed meanwhile is left out.
func (s *Store) ListBoxPage(ctx context.Context, q store.BoxQuery) (store.BoxPage, error) {
	const op = "list box page"
	if err := q.Check(); err != nil {
		return store.BoxPage{}, fmt.Errorf("%s: %w", op, err)
	}
	bq := s.D.BoxPage(q)
	var page store.BoxPage
	var names []string
	var spends []int64
	err := s.each(ctx, op, bq.Page, func(r Scanner) error {
		var n string
		var sp, matched int64
		err := r.Scan(&n, &sp, &matched)
		names, spends = append(names, n), append(spends, sp)
		if bq.Counted {
			page.Matched = int(matched)
		}
		return err
	}, bq.Args...)
	if err != nil {
		return store.BoxPage{}, err
	}
	if q.Count && (!bq.Counted || len(names) == 0) {
		if err := s.R.QueryRowContext(ctx, bq.Count, bq.CountArgs...).Scan(&page.Matched); err != nil {
			return store.BoxPage{}, s.D.Translate(op, err)
		}
	}
	names = page.Cut(q, names, spends)
	if len(names) == 0 {
		return page, nil
	}
	if page.Boxes, err = s.listedBoxes(ctx, op, names, q.Month); err != nil {
		return store.BoxPage{}, err
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
// reports and, when month is not "", their month. Errors are translated,
// prefixed with op.
func (s *Store) listedBoxes(ctx context.Context, op string, names []string, month string) ([]store.ListedBox, error) {
	args := make([]any, len(names))
	at := make(map[string]int, len(names))
	for i, n := range names {
		args[i], at[n] = n, i
	}
	out := make([]store.ListedBox, len(names))
	err := s.each(ctx, op, "SELECT "+boxColumns+" FROM boxes WHERE name IN "+in(1, len(names)), func(r Scanner) error {
		b, err := scanBox(r)
		out[at[b.Name]].Box = b
		return err
	}, args...)
	if err != nil {
		return nil, err
	}
	err = s.each(ctx, op, "SELECT box, doc, at FROM declarations WHERE box IN "+in(1, len(names)), func(r Scanner) error {
		var box string
		d := &store.KeptDeclaration{}
		err := r.Scan(&box, &d.Doc, Time(&d.At))
		out[at[box]].Declaration = d
		return err
	}, args...)
	if err != nil || month == "" {
		return out, err
	}
	return out, s.each(ctx, op, boxMonths+" WHERE b.name IN "+in(2, len(names)), func(r Scanner) error {
		m, err := scanBoxMonth(r)
		out[at[m.Box]].Month = m
		return err
	}, append([]any{month}, args...)...)
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
