package operator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/intentius/boxbroker/internal/spend"
)

// PriceTable is the price table a broker charges by, as the admin API
// sends it: Table, the table as a price file (spend.Prices.File, which
// makes the same table over the built-in one); UnpricedAs, the model
// whose price a model neither in the table nor of a family in it is
// charged at; and Path, the price file the broker read over the
// built-in table ("" for the built-in table alone).
type PriceTable struct {
	Path       string          `json:"path"`
	UnpricedAs string          `json:"unpricedAs"`
	Table      json.RawMessage `json:"table"`
}

// Prices reads t back into the table it was made from; an error when
// Table is not a price file or UnpricedAs is not in it.
func (t PriceTable) Prices() (*spend.Prices, error) {
	p, err := spend.ParsePrices(t.Table)
	if err != nil {
		return nil, fmt.Errorf("the price table: %w", err)
	}
	if p, err = p.WithUnpricedAs(t.UnpricedAs); err != nil {
		return nil, fmt.Errorf("the price table: %w", err)
	}
	return p, nil
}

// Prices returns the price table the broker charges by: Config.Prices,
// or the built-in table.
func (s *Service) Prices(ctx context.Context) (PriceTable, error) {
	p := s.cfg.Prices
	if p == nil {
		p = spend.DefaultPrices()
	}
	b, err := p.File()
	if err != nil {
		return PriceTable{}, fmt.Errorf("price table: %w", err)
	}
	return PriceTable{Path: p.Path(), UnpricedAs: p.UnpricedAs(), Table: b}, nil
}
