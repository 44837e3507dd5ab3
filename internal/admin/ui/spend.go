package ui

import (
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/spend"
)

// The fleet's spend: every box's spend in a month (this month unless the
// month picker names another), in total and by payer and principal, by
// principal with charged beside measured, by model with the unpriced
// marked, and by box; with CSV downloads of it and of the audit log.

// fleetRows is how many lines of each of the spend page's lists it
// shows; the CSV download holds them all.
const fleetRows = 25

// monthLink is one month the spend page links to.
type monthLink struct {
	Label, Month string
	Current      bool
}

// spendPage is the spend page's content.
type spendPage struct {
	chrome
	admin.FleetSpend
	// ThisMonth is the current month (UTC); Months the quick links.
	ThisMonth string
	Months    []monthLink
	// Prev and Next are the months either side of the one shown; Next is
	// "" past this month.
	Prev, Next string
	// The lists cut to fleetRows; More* how many lines were left out.
	Payers                                       []admin.PayerSpend
	Principals                                   []admin.PrincipalSpend
	Models                                       []admin.ModelSpend
	Boxes                                        []admin.BoxSpend
	MorePayers, MorePrincipals, MoreModels, More int
	// Grains are the spend CSV's row kinds.
	Grains []string
	// UnpricedModels names the models with calls the broker had no price
	// for.
	UnpricedModels []string
	// Prices is the price table the broker charges by.
	Prices priceTable
}

// firstN returns at most n of xs, and how many it left out.
func firstN[T any](xs []T, n int) ([]T, int) {
	if len(xs) <= n {
		return xs, 0
	}
	return xs[:n], len(xs) - n
}

// monthAdd is month (YYYY-MM) moved by n months.
func monthAdd(month string, n int) string {
	t, err := time.Parse("2006-01", month)
	if err != nil {
		return month
	}
	return t.AddDate(0, n, 0).Format("2006-01")
}

func (u *Page) spendPage(w http.ResponseWriter, r *http.Request, sess *Session) error {
	month, err := u.a.Month(r)
	if err != nil {
		return err
	}
	f, err := u.a.FleetSpend(r.Context(), month)
	if err != nil {
		return err
	}
	this := spend.Month(u.cfg.Now())
	p := spendPage{chrome: u.chrome(r, sess), FleetSpend: f, ThisMonth: this,
		Prev: monthAdd(month, -1), Grains: admin.SpendCSVGrains}
	if month < this {
		p.Next = monthAdd(month, 1)
	}
	for i, label := range []string{"This month", "Last month"} {
		m := monthAdd(this, -i)
		p.Months = append(p.Months, monthLink{Label: label, Month: m, Current: m == month})
	}
	p.Payers, p.MorePayers = firstN(f.ByPayer, fleetRows)
	p.Principals, p.MorePrincipals = firstN(f.ByPrincipal, fleetRows)
	p.Models, p.MoreModels = firstN(f.ByModel, fleetRows)
	p.Boxes, p.More = firstN(f.ByBox, fleetRows)
	for _, m := range f.ByModel {
		if !m.Priced {
			p.UnpricedModels = append(p.UnpricedModels, m.Model)
		}
	}
	if p.Prices, err = u.prices(r.Context()); err != nil {
		return err
	}
	u.render(w, http.StatusOK, "spend", p)
	return nil
}
