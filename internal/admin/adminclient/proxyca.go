package adminclient

import (
	"context"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
)

// ProxyCA returns the certificates of the egress proxy's CA a box is to
// trust, and when a pending rotation's CA signs from; never its key.
func (c *Client) ProxyCA(ctx context.Context) (operator.ProxyCAView, error) {
	return call[operator.ProxyCAView](ctx, c, http.MethodGet, "/api/proxy/ca", nil)
}

// RotateProxyCA makes a new CA for the egress proxy, to sign once grace
// has passed (at once for 0), and returns its certificate and that
// moment.
func (c *Client) RotateProxyCA(ctx context.Context, grace time.Duration) (operator.ProxyCARotation, error) {
	return call[operator.ProxyCARotation](ctx, c, http.MethodPost, "/api/proxy/ca/rotate", admin.ProxyCARotate{Grace: grace.String()})
}

// Prices returns the price table the broker charges by.
func (c *Client) Prices(ctx context.Context) (operator.PriceTable, error) {
	return call[operator.PriceTable](ctx, c, http.MethodGet, "/api/prices", nil)
}
