package ui

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// A box's own page: everything the list shows of it and more — its
// budget told plainly, its refusals grouped, its secrets checked against
// its declaration, its pictures, a paged request log — and the forms
// that change it.

// card is one box as its page shows it.
type card struct {
	operator.BoxView
	// Groups are its refusals of the last 7 days, grouped.
	Groups        []store.RefusalGroup
	FeedbackCount int
	// Measured is this month's spend, measured beside reported.
	Measured operator.SpendReport
	// Models is this month's measured spend by model, the dearest first;
	// a model with calls the broker had no price for is not Priced.
	Models []modelLine
	// Budgets are the box's budgets and where they stand this month.
	Budgets operator.BudgetList
	// Windows are its window budgets and Rates its rate limits; Alerts
	// its latest budget alerts, newest first.
	Windows []operator.WindowBudgetView
	Rates   []store.RateLimit
	Alerts  []store.BudgetAlert
	// Blocked says, when the box's metered calls are refused for a
	// budget, why and until when; "" when they are not.
	Blocked string
	// Grants counts the box's grants, and Current those that stand.
	Grants, Current int
	// CacheCold is true when the box's prompt cache stopped hitting:
	// its hit ratio in the last 24 hours is under half its month's.
	CacheCold bool
	// TokenSeen are the groups of answers, in the last 7 days, from a
	// host that held the box's own token (capability.ReasonTokenSeen),
	// each message naming the host.
	TokenSeen []store.RefusalGroup
}

// modelLine is a box's calls to one model in a month.
type modelLine struct {
	Model           string
	Calls, Unpriced int64
	MeasuredUSD     float64
}

// byModel sums usage by model, the dearest first.
func byModel(usage []operator.UsageView) []modelLine {
	var out []modelLine
	at := map[string]int{}
	for _, u := range usage {
		m := deref(u.Model, "")
		i, ok := at[m]
		if !ok {
			i = len(out)
			at[m] = i
			out = append(out, modelLine{Model: m})
		}
		out[i].Calls += u.Calls
		out[i].Unpriced += u.Unpriced
		out[i].MeasuredUSD += u.CostUSD
	}
	slices.SortStableFunc(out, func(a, b modelLine) int {
		return cmp.Or(cmp.Compare(b.MeasuredUSD, a.MeasuredUSD), cmp.Compare(a.Model, b.Model))
	})
	return out
}

// refusalDays is how far back a box's page groups refusals.
const refusalDays = 7

// overBudgetRE reads, from a refusal for a spent budget (spend.OverBudget),
// the bound of the call it refused and whose budget it was.
var (
	costUpToRE  = regexp.MustCompile(`could cost up to (\$[0-9][0-9.,]*[0-9])`)
	budgetForRE = regexp.MustCompile(`monthly budget for (\S+) on this box`)
)

// blocked says whether b's metered calls are refused for a budget, from
// its budgets and its newest audit entries: a budget with nothing left,
// or a refusal for a spent budget newer than any request served this
// month and than that budget's last change. The bound is the one the
// broker computed for the call it refused (spend.Meter.Bound, written in
// the refusal's message).
func (u *Page) blocked(ctx context.Context, box string, budgets operator.BudgetList) (string, error) {
	now := u.cfg.Now()
	month := spend.Month(now)
	resets := spend.Resets(month).Format("2006-01-02") + " at 00:00 UTC"
	entries, err := u.cfg.Store.ListAudit(ctx, store.AuditQuery{Box: box, Since: spend.Resets(month).AddDate(0, -1, 0), Limit: 200})
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Capability == store.ActorAdmin {
			continue
		}
		if e.Reason == "" {
			break // served since
		}
		m := costUpToRE.FindStringSubmatch(e.Message)
		if m == nil {
			continue
		}
		principal := ""
		if p := budgetForRE.FindStringSubmatch(e.Message); p != nil {
			principal = p[1]
		}
		i := slices.IndexFunc(budgets.Budgets, func(b operator.BudgetView) bool { return deref(b.Principal, "") == principal })
		if i < 0 {
			break // that budget was removed since
		}
		unchanged, err := u.budgetsSince(ctx, box, e.At)
		if err != nil {
			return "", err
		}
		if _, ok := unchanged[principal]; !ok {
			break // that budget was set again since
		}
		bv := budgets.Budgets[i]
		return fmt.Sprintf("Blocked: the next call could cost up to %s and %s is left of %s (%s). It resets on %s, or raise the budget below.",
			m[1], usd(bv.Left), whose(principal), usd(bv.USD), resets), nil
	}
	for _, b := range budgets.Budgets {
		if b.Left <= 0 {
			return fmt.Sprintf("Blocked: nothing is left of %s (%s), so every call it pays is refused. It resets on %s, or raise the budget below.",
				whose(deref(b.Principal, "")), usd(b.USD), resets), nil
		}
	}
	return "", nil
}

// whose names the budget of principal ("" for the box's own).
func whose(principal string) string {
	if principal == "" {
		return "its own budget"
	}
	return "the budget for " + principal
}

// card reads what the page shows of v beside the API's view.
func (u *Page) card(ctx context.Context, v operator.BoxView) (card, error) {
	c := card{BoxView: v}
	now := u.cfg.Now()
	var err error
	if c.Groups, err = u.cfg.Store.RefusalGroups(ctx, v.Name, now.Add(-refusalDays*24*time.Hour), 50); err != nil {
		return c, err
	}
	for _, g := range c.Groups {
		if g.Reason == capability.ReasonTokenSeen {
			c.TokenSeen = append(c.TokenSeen, g)
		}
	}
	fb, err := u.cfg.Store.CountFeedback(ctx, v.Name)
	if err != nil {
		return c, err
	}
	c.FeedbackCount = fb.Batches
	month := spend.Month(now)
	if c.Measured, err = u.a.Operator().Spend(ctx, v.Name, month); err != nil {
		return c, err
	}
	c.Models = byModel(c.Measured.Usage)
	if m, d := c.Measured.Cache.Month.HitRatio, c.Measured.Cache.Last24h.HitRatio; m != nil && d != nil {
		c.CacheCold = *d < *m/2
	}
	if c.Budgets, err = u.a.Operator().Budgets(ctx, v.Name, month); err != nil {
		return c, err
	}
	if c.Blocked, err = u.blocked(ctx, v.Name, c.Budgets); err != nil {
		return c, err
	}
	if c.Windows, err = u.a.Operator().WindowBudgets(ctx, v.Name); err != nil {
		return c, err
	}
	if c.Rates, err = u.cfg.Store.ListRateLimits(ctx, v.Name); err != nil {
		return c, err
	}
	if c.Alerts, err = u.cfg.Store.ListAlerts(ctx, v.Name, 10); err != nil {
		return c, err
	}
	grants, err := u.cfg.Store.ListGrants(ctx, v.Name)
	if err != nil {
		return c, err
	}
	for _, g := range grants {
		c.Grants++
		if operator.GrantState(g.RevokedAt, g.ExpiresAt, now) == operator.GrantCurrent {
			c.Current++
		}
	}
	return c, nil
}

// logPageSize is how many requests one page of a box's request log shows.
const logPageSize = 25

// boxPageData is one box's page.
type boxPageData struct {
	chrome
	Box       card
	Recent    []admin.AuditView
	LogPage   int
	LogPrev   string
	LogNext   string
	Secrets   []operator.SecretView
	Missing   []string
	Extra     []string
	Resources []operator.ResourceView
	Sections  []renderedSection
	Chart     chart
	// SpendChart is its measured spend per day this month, from the
	// cost its audit entries record, against its own budget.
	SpendChart chart
}

type renderedSection struct {
	Title string
	HTML  template.HTML
}

func (u *Page) boxPage(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, err := u.a.Box(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	d, err := u.a.Operator().Declaration(ctx, b.Name)
	if err != nil {
		return err
	}
	now := u.cfg.Now()
	v := operator.BoxViewOf(b, d, now)
	c, err := u.card(ctx, v)
	if err != nil {
		return err
	}
	page := boxPageData{chrome: u.chrome(r, sess), Box: c}
	page.LogPage, _ = strconv.Atoi(r.URL.Query().Get("log"))
	page.LogPage = min(max(page.LogPage, 1), 10_000)
	recent, err := u.cfg.Store.AuditPage(ctx, b.Name, (page.LogPage-1)*logPageSize, logPageSize+1)
	if err != nil {
		return err
	}
	base := "/ui/boxes/" + b.Name // a box name needs no escaping
	if len(recent) > logPageSize {
		recent = recent[:logPageSize]
		page.LogNext = base + "?log=" + strconv.Itoa(page.LogPage+1) + "#log"
	}
	if page.LogPage > 1 {
		page.LogPrev = base + "?log=" + strconv.Itoa(page.LogPage-1) + "#log"
	}
	for _, e := range recent {
		page.Recent = append(page.Recent, operator.AuditViewOf(e))
	}
	page.Secrets, err = u.a.Operator().ListSecrets(ctx, b.Name)
	if err != nil {
		return err
	}
	var held []string
	for _, sec := range page.Secrets {
		held = append(held, sec.Name)
	}
	declared := declaredSecrets(d, u.cfg.Broker)
	page.Missing, page.Extra = absent(declared, held), absent(held, declared)
	if page.Resources, err = u.a.Operator().ListResources(ctx, b.Name); err != nil {
		return err
	}
	hours, err := u.cfg.Store.AuditHours(ctx, b.Name, now.Add(-7*24*time.Hour))
	if err != nil {
		return err
	}
	page.Chart = hourChart(hours, now)
	days, err := u.cfg.Store.AuditDays(ctx, b.Name, monthStart(now))
	if err != nil {
		return err
	}
	hasBudget, limit := ownBudget(c.Budgets)
	page.SpendChart = dayChart(days, hasBudget, limit, now)
	u.mu.RLock()
	sections := append([]BoxSection(nil), u.sections...)
	u.mu.RUnlock()
	for _, sec := range sections {
		h, err := sec.Render(ctx, b.Name, page.Form)
		if err != nil {
			return fmt.Errorf("box page section %q: %v", sec.Title, err) // %v: the generic error page, whatever err is
		}
		page.Sections = append(page.Sections, renderedSection{Title: sec.Title, HTML: h})
	}
	u.render(w, http.StatusOK, "box", page)
	return nil
}

// ownBudget is the box's own budget's limit in micro-dollars, and whether
// it has one (the budget with no principal).
func ownBudget(budgets operator.BudgetList) (bool, int64) {
	for _, b := range budgets.Budgets {
		if b.Principal == nil {
			return true, spend.Micros(b.USD)
		}
	}
	return false, 0
}
