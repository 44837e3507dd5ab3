package ui

import (
	"context"

	"github.com/intentius/boxbroker/internal/spend"
)

// The price table the broker charges by, as the operator service's
// Prices view gives it (what `boxbroker prices` prints and GET
// /api/prices answers), shown read-only at the foot of the spend page.

// priceRow is one model's price.
type priceRow struct {
	Model string
	spend.Price
}

// priceTable is the spend page's price table: the table as read (the
// page shows its Checked, Source, UnpricedAs and Removed), Path, the
// price file read over the built-in table ("" for none), and a row a
// model.
type priceTable struct {
	*spend.Prices
	Path string
	Rows []priceRow
}

// prices reads the price table through the operator service.
func (u *Page) prices(ctx context.Context) (priceTable, error) {
	t, err := u.a.Operator().Prices(ctx)
	if err != nil {
		return priceTable{}, err
	}
	p, err := t.Prices()
	if err != nil {
		return priceTable{}, err
	}
	pt := priceTable{Prices: p, Path: t.Path}
	for _, m := range p.Models() {
		pr, _ := p.Get(m)
		pt.Rows = append(pt.Rows, priceRow{Model: m, Price: pr})
	}
	return pt, nil
}
