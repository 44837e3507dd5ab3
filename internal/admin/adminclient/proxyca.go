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
	var out operator.ProxyCAView
	err := c.do(ctx, http.MethodGet, "/api/proxy/ca", nil, &out)
	return out, err
}

// RotateProxyCA makes a new CA for the egress proxy, to sign once grace
// has passed (at once for 0), and returns its certificate and that
// moment.
func (c *Client) RotateProxyCA(ctx context.Context, grace time.Duration) (operator.ProxyCARotation, error) {
	var out operator.ProxyCARotation
	err := c.do(ctx, http.MethodPost, "/api/proxy/ca/rotate", admin.ProxyCARotate{Grace: grace.String()}, &out)
	return out, err
}
