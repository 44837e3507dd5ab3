package adminclient

import (
	"context"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// Prices returns the price table the broker charges by.
func (c *Client) Prices(ctx context.Context) (operator.PriceTable, error) {
	var out operator.PriceTable
	err := c.do(ctx, http.MethodGet, "/api/prices", nil, &out)
	return out, err
}
