package ui

import (
	"cmp"
	"context"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// The owner's page's list of boxes: one row a box. Sorted by name or by
// this month's spend, with or without a search, the store picks the
// page (store.ListBoxPage) and only its boxes are read; sorted by another
// column or filtered by state, every box's row is built from the same
// store pages, read through to the last, then filtered, sorted and paged
// here. Every link of the page is a plain GET.

// Box states, as the list's state column and filter name them.
const (
	stateOK      = "ok"
	statePaused  = "paused"
	stateBlocked = "blocked"
	stateNever   = "never"
	stateSecrets = "secrets"
)

// stateName is a state's key and how the page writes it.
type stateName struct{ Key, Label string }

// stateLabels are the states as the page writes them, in filter order.
var stateLabels = []stateName{
	{stateOK, "ok"},
	{statePaused, "paused"},
	{stateBlocked, "blocked by budget"},
	{stateNever, "never reported"},
	{stateSecrets, "secrets missing"},
}

func stateLabel(k string) string {
	for _, s := range stateLabels {
		if s.Key == k {
			return s.Label
		}
	}
	return k
}

// listPageSize is how many boxes one page of the list shows.
const listPageSize = 50

// row is one box in the list.
type row struct {
	Name     string
	Title    string
	Reported time.Time
	Payer    string
	// BoxMonth is the box's month: its measured spend, and its own
	// budget (micro-dollars); Left is what is left of that budget.
	store.BoxMonth
	Left int64
	// BoxActivity is the box's last 24 hours: requests, the broker's
	// refusals and, apart, the upstream's failures.
	store.BoxActivity
	// Cache is the box's prompt-cache hit ratio this month and in the
	// last 24 hours (nil for no prompt tokens); CacheCold when the day's
	// is under half the month's.
	CacheMonth, CacheDay *float64
	CacheCold            bool
	State                string
	// Missing are secrets declared and not held.
	Missing []string
}

// boxState says what the list's state column shows, the first that
// holds: paused, never reported, blocked by budget, secrets missing, ok.
func boxState(paused, reported, blocked bool, missing []string) string {
	switch {
	case paused:
		return statePaused
	case !reported:
		return stateNever
	case blocked:
		return stateBlocked
	case len(missing) > 0:
		return stateSecrets
	}
	return stateOK
}

// declaredSecrets are the secret names d's egress entry for this broker
// lists.
func declaredSecrets(d *protocol.Declaration, broker string) []string {
	c := d.Find(protocol.Egress, broker)
	if c == nil {
		return nil
	}
	return c.Scope
}

// absent is the names of xs not in ys, in order; nil for none: the
// secrets a box declares and does not hold, or holds and does not declare.
func absent(xs, ys []string) (out []string) {
	for _, x := range xs {
		if !slices.Contains(ys, x) {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// blockedBy reports whether a box's calls are refused for its budget now:
// its own budget has nothing left, or, in the last day, its last answer
// this month was a refusal for a spent budget (of the box or of its
// payer's principal) with nothing served since, and one of its budgets
// is as it was then (budgetsSince): a budget removed or set again since
// may well let the next call through.
func (u *Page) blockedBy(ctx context.Context, box string, m store.BoxMonth, a store.BoxActivity, monthStart time.Time) (bool, error) {
	if m.HasBudget && m.Limit-m.Spent-m.Reserved <= 0 {
		return true, nil
	}
	if a.LastOverBudget.IsZero() || a.LastOverBudget.Before(monthStart) || !a.LastOverBudget.After(a.LastServed) {
		return false, nil
	}
	unchanged, err := u.budgetsSince(ctx, box, a.LastOverBudget)
	return len(unchanged) > 0, err
}

// budgetsSince returns box's monthly budgets that were not set since at,
// by principal ("" for the box's own): those a refusal at at for a spent
// budget may still hold for. The store is read only for a box with such
// a refusal, which few boxes have at once.
func (u *Page) budgetsSince(ctx context.Context, box string, at time.Time) (map[string]store.Budget, error) {
	bs, err := u.cfg.Store.ListBudgets(ctx, box)
	if err != nil {
		return nil, err
	}
	out := map[string]store.Budget{}
	for _, b := range bs {
		if b.Window == "" && !b.UpdatedAt.After(at) {
			out[b.Principal] = b
		}
	}
	return out, nil
}

// fleetFacts is what the list reads once for every row, whichever boxes
// it shows: the held secrets' names, the last day's activity and the
// prompt cache's tallies, each by box (each scales with what was used,
// not with the number of boxes).
type fleetFacts struct {
	monthStart time.Time
	held       map[string][]string
	act        map[string]store.BoxActivity
	// cacheMonth and cacheDay are the month's and the last 24 hours'.
	cacheMonth, cacheDay map[string]store.CacheUsage
}

// facts reads fleetFacts for month, at now.
func (u *Page) facts(ctx context.Context, now time.Time, month string) (fleetFacts, error) {
	st := u.cfg.Store
	f := fleetFacts{monthStart: spend.Resets(month).AddDate(0, -1, 0),
		cacheMonth: map[string]store.CacheUsage{}, cacheDay: map[string]store.CacheUsage{}}
	var err error
	if f.held, err = st.SecretNames(ctx); err != nil {
		return fleetFacts{}, err
	}
	acts, err := st.BoxActivity(ctx, now.Add(-24*time.Hour))
	if err != nil {
		return fleetFacts{}, err
	}
	f.act = make(map[string]store.BoxActivity, len(acts))
	for _, a := range acts {
		f.act[a.Box] = a
	}
	cache, err := u.a.Operator().Cache(ctx, "", month)
	if err != nil {
		return fleetFacts{}, err
	}
	add := func(m map[string]store.CacheUsage, box string, t operator.CacheTokens) {
		c := m[box]
		c.Add(store.CacheUsage{InputTokens: t.InputTokens, CacheWriteTokens: t.CacheWriteTokens, CacheReadTokens: t.CacheReadTokens})
		m[box] = c
	}
	for _, l := range cache.ByEntry {
		add(f.cacheMonth, l.Box, l.Month)
		add(f.cacheDay, l.Box, l.Last24h)
	}
	return f, nil
}

// row makes b's row from its last report kept (nil for none), its month
// m and f.
func (u *Page) row(ctx context.Context, b store.Box, kept *store.KeptDeclaration, m store.BoxMonth, f fleetFacts) (row, error) {
	r := row{Name: b.Name, Payer: b.PayerKind}
	if r.Payer == "" {
		r.Payer = protocol.PayerShared
	}
	if b.PayerPrincipal != "" {
		r.Payer += " " + b.PayerPrincipal
	}
	d, err := operator.DecodeDeclaration(b.Name, kept)
	if err != nil {
		return row{}, err
	}
	if d != nil {
		r.Reported = d.At
		if d.Listing != nil {
			r.Title = d.Listing.Title
		}
	}
	a := f.act[b.Name]
	r.BoxMonth, r.BoxActivity = m, a
	r.Left = max(m.Limit-m.Spent-m.Reserved, 0)
	r.CacheMonth, r.CacheDay = operator.HitRatio(f.cacheMonth[b.Name]), operator.HitRatio(f.cacheDay[b.Name])
	r.CacheCold = r.CacheMonth != nil && r.CacheDay != nil && *r.CacheDay < *r.CacheMonth/2
	r.Missing = absent(declaredSecrets(d, u.cfg.Broker), f.held[b.Name])
	blocked, err := u.blockedBy(ctx, b.Name, m, a, f.monthStart)
	if err != nil {
		return row{}, err
	}
	r.State = boxState(b.Paused, d != nil, blocked, r.Missing)
	return r, nil
}

// rows reads every box's row, a store.MaxBoxPage of boxes at a time:
// what a sort by a column the store does not sort by, or a filter by
// state, needs.
func (u *Page) rows(ctx context.Context) ([]row, error) {
	now := u.cfg.Now()
	q := store.BoxQuery{Month: spend.Month(now), Limit: store.MaxBoxPage}
	var all []store.ListedBox
	for {
		p, err := u.cfg.Store.ListBoxPage(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Boxes...)
		if q.After = p.Next; q.After == nil {
			return u.rowsOf(ctx, now, all)
		}
	}
}

// rowsOf makes the rows of boxes, at now.
func (u *Page) rowsOf(ctx context.Context, now time.Time, boxes []store.ListedBox) ([]row, error) {
	f, err := u.facts(ctx, now, spend.Month(now))
	if err != nil {
		return nil, err
	}
	out := make([]row, 0, len(boxes))
	for _, lb := range boxes {
		r, err := u.row(ctx, lb.Box, lb.Declaration, lb.Month, f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// storeSorts are the list's sorts the store does itself (store.BoxQuery).
var storeSorts = map[string]string{"name": store.BoxSortName, "spend": store.BoxSortSpend}

// pageRows reads the rows of q's page alone, searched, sorted and paged
// by the store, with how many boxes match and how many there are; ok is
// false when q sorts or filters by what the store does not (then rows
// does it).
func (u *Page) pageRows(ctx context.Context, q *listQuery) (rows []row, matched, total int, ok bool, err error) {
	by, ok := storeSorts[q.Sort]
	if !ok || q.State != "" {
		return nil, 0, 0, false, nil
	}
	now := u.cfg.Now()
	month := spend.Month(now)
	sq := store.BoxQuery{Search: q.Q, Sort: by, Desc: q.Desc, Month: month, Limit: listPageSize, Offset: (q.Page - 1) * listPageSize, Count: true}
	p, err := u.cfg.Store.ListBoxPage(ctx, sq)
	if err != nil {
		return nil, 0, 0, true, err
	}
	if last := pageCount(p.Matched); q.Page > last {
		q.Page = last // past the end: the last page, as the whole list does
		sq.Offset = (q.Page - 1) * listPageSize
		if p, err = u.cfg.Store.ListBoxPage(ctx, sq); err != nil {
			return nil, 0, 0, true, err
		}
	}
	total = p.Matched
	if q.Q != "" {
		all, err := u.cfg.Store.ListBoxPage(ctx, store.BoxQuery{Limit: 1, Count: true})
		if err != nil {
			return nil, 0, 0, true, err
		}
		total = all.Matched
	}
	rows, err = u.rowsOf(ctx, now, p.Boxes)
	return rows, p.Matched, total, true, err
}

// listQuery is the list's sort, filter and page, read from the URL.
type listQuery struct {
	Sort  string
	Desc  bool
	Q     string
	State string
	Page  int
}

// sortKeys are the columns the list sorts by.
var sortKeys = map[string]func(a, b row) int{
	"name":     func(a, b row) int { return strings.Compare(a.Name, b.Name) },
	"title":    func(a, b row) int { return strings.Compare(a.Title, b.Title) },
	"report":   func(a, b row) int { return a.Reported.Compare(b.Reported) },
	"payer":    func(a, b row) int { return strings.Compare(a.Payer, b.Payer) },
	"spend":    func(a, b row) int { return cmp.Compare(a.Measured, b.Measured) },
	"budget":   func(a, b row) int { return cmp.Compare(a.Left, b.Left) },
	"requests": func(a, b row) int { return cmp.Compare(a.Requests, b.Requests) },
	"refusals": func(a, b row) int { return cmp.Compare(a.Refusals, b.Refusals) },
	"cache":    func(a, b row) int { return cmpRatio(a.CacheDay, b.CacheDay) },
	"state":    func(a, b row) int { return strings.Compare(a.State, b.State) },
}

// cmpRatio orders ratios, none first.
func cmpRatio(a, b *float64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}

// readListQuery reads the list's query; what it does not know it ignores.
func readListQuery(v url.Values) listQuery {
	q := listQuery{Sort: v.Get("sort"), Desc: v.Get("desc") == "1", Q: strings.TrimSpace(v.Get("q")), State: v.Get("state")}
	if _, ok := sortKeys[q.Sort]; !ok {
		q.Sort = "name"
	}
	if len(q.Q) > admin.MaxSearch {
		q.Q = q.Q[:admin.MaxSearch]
	}
	if !slices.ContainsFunc(stateLabels, func(s stateName) bool { return s.Key == q.State }) {
		q.State = "" // not a state the list names
	}
	q.Page, _ = strconv.Atoi(v.Get("page"))
	q.Page = max(q.Page, 1)
	return q
}

// url is the list's URL for q.
func (q listQuery) url() string {
	v := url.Values{}
	if q.Sort != "name" {
		v.Set("sort", q.Sort)
	}
	if q.Desc {
		v.Set("desc", "1")
	}
	if q.Q != "" {
		v.Set("q", q.Q)
	}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	if len(v) == 0 {
		return "/ui/"
	}
	return "/ui/?" + v.Encode()
}

// urlAt is the list's URL for q's page n.
func (q listQuery) urlAt(n int) string {
	q.Page = n
	return q.url()
}

// pageCount is how many pages of the list n boxes fill, at least one.
func pageCount(n int) int { return max((n+listPageSize-1)/listPageSize, 1) }

// apply filters, sorts and pages rows by q, and returns the page's rows
// and how many matched.
func (q *listQuery) apply(rows []row) ([]row, int) {
	kept := rows[:0:0]
	for _, r := range rows {
		if q.Q != "" && !strings.Contains(r.Name, strings.ToLower(q.Q)) && !strings.Contains(strings.ToLower(r.Title), strings.ToLower(q.Q)) {
			continue
		}
		if q.State != "" && r.State != q.State {
			continue
		}
		kept = append(kept, r)
	}
	by := sortKeys[q.Sort]
	slices.SortStableFunc(kept, func(a, b row) int {
		c := by(a, b)
		if q.Desc {
			c = -c
		}
		return cmp.Or(c, strings.Compare(a.Name, b.Name)) // ties by name, ascending
	})
	pages := pageCount(len(kept))
	q.Page = min(q.Page, pages)
	from := (q.Page - 1) * listPageSize
	return kept[from:min(from+listPageSize, len(kept))], len(kept)
}

// column is one sortable column head.
type column struct {
	Label, URL string
	Num        bool
	// Arrow is ▲ or ▼ on the column sorted by.
	Arrow string
}

// pageLink is one link of the pager; a Gap stands for pages left out.
type pageLink struct {
	N       int
	URL     string
	Current bool
	Gap     bool
}

// pagerNeighbours is how many pages on each side of the current one the
// pager links, besides the first and the last.
const pagerNeighbours = 2

// pager links the first and last of pages, and the pages around q's, with
// a gap for each run of pages left out: a few links however many pages.
func pager(q listQuery, pages int) []pageLink {
	var out []pageLink
	for n := 1; n <= pages; n++ {
		if n != 1 && n != pages && (n < q.Page-pagerNeighbours || n > q.Page+pagerNeighbours) {
			if len(out) > 0 && !out[len(out)-1].Gap {
				out = append(out, pageLink{Gap: true})
			}
			if n < q.Page {
				n = q.Page - pagerNeighbours - 1 // on to the current page's neighbours
			} else {
				n = pages - 1 // on to the last page
			}
			continue
		}
		out = append(out, pageLink{N: n, URL: q.urlAt(n), Current: n == q.Page})
	}
	return out
}

// listPage is the list page's content.
type listPage struct {
	chrome
	// Waiting is the "waiting for you" list of pending proposals.
	Waiting  template.HTML
	Query    listQuery
	Columns  []column
	Rows     []row
	Matched  int
	Total    int
	States   []stateName
	Pages    []pageLink
	Prev     string
	Next     string
	Chart    chart
	Now      string
	Counts   map[string]int
	NoFilter string
	// DeadLetters counts the batches of records the store refused for
	// good on this replica (0: none, and no line).
	DeadLetters int
	// Fleet is every box's spend this month, its totals alone.
	Fleet admin.FleetSpend
}

func (u *Page) overview(w http.ResponseWriter, r *http.Request, sess *Session) error {
	now := u.cfg.Now()
	q := readListQuery(r.URL.Query())
	page := listPage{chrome: u.chrome(r, sess), States: stateLabels, Now: protocol.FormatTime(now)}
	var paged bool
	var err error
	page.Rows, page.Matched, page.Total, paged, err = u.pageRows(r.Context(), &q)
	if err != nil {
		return err
	}
	if !paged {
		all, err := u.rows(r.Context())
		if err != nil {
			return err
		}
		page.Total, page.Counts = len(all), map[string]int{}
		for _, row := range all {
			page.Counts[row.State]++
		}
		page.Rows, page.Matched = q.apply(all)
	}
	page.Query = q
	heads := []struct{ key, label string }{
		{"name", "Box"}, {"report", "Last report"}, {"payer", "Payer"}, {"spend", "Spend this month"},
		{"budget", "Budget left"}, {"requests", "Requests 24 h"}, {"refusals", "Refusals 24 h"}, {"cache", "Cache hit 24 h"}, {"state", "State"},
	}
	for _, h := range heads {
		c := q
		c.Sort, c.Page = h.key, 1
		c.Desc = q.Sort == h.key && !q.Desc
		col := column{Label: h.label, URL: c.url(), Num: h.key == "spend" || h.key == "budget" || h.key == "requests" || h.key == "refusals" || h.key == "cache"}
		if q.Sort == h.key {
			col.Arrow = map[bool]string{false: "▲", true: "▼"}[q.Desc]
		}
		page.Columns = append(page.Columns, col)
	}
	pages := pageCount(page.Matched)
	page.Pages = pager(q, pages)
	if q.Page > 1 {
		page.Prev = q.urlAt(q.Page - 1)
	}
	if q.Page < pages {
		page.Next = q.urlAt(q.Page + 1)
	}
	c := q
	c.Q, c.State, c.Page = "", "", 1
	page.NoFilter = c.url()
	hours, err := u.brokerHours(r.Context(), now.Add(-7*24*time.Hour), now)
	if err != nil {
		return err
	}
	page.Chart = hourChart(hours, now)
	if page.Fleet, err = u.a.FleetTotal(r.Context(), spend.Month(now)); err != nil {
		return err
	}
	if u.opts.DeadLetters != nil {
		page.DeadLetters = u.opts.DeadLetters()
	}
	if page.Waiting, err = u.waiting(r.Context(), sess); err != nil {
		return err
	}
	u.render(w, http.StatusOK, "boxes", page)
	return nil
}
