package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/intentius/boxbroker/internal/operator"
)

// ListSecrets lists a box's egress secrets: names, hosts, kinds and body
// fields, never a value.
func (c *Client) ListSecrets(ctx context.Context, box string) ([]operator.SecretView, error) {
	out, err := call[operator.SecretList](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/secrets", nil)
	return out.Secrets, err
}

// SetSecret sets a box's plain egress secret name: its host, its value
// (in the request's body only) and the body fields it is written in.
func (c *Client) SetSecret(ctx context.Context, box, name string, sv operator.SecretValue) (operator.SecretView, error) {
	return call[operator.SecretView](ctx, c, http.MethodPut, "/api/boxes/"+url.PathEscape(box)+"/secrets/"+url.PathEscape(name), sv)
}

// RemoveSecret removes a box's egress secret name.
func (c *Client) RemoveSecret(ctx context.Context, box, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/boxes/"+url.PathEscape(box)+"/secrets/"+url.PathEscape(name), nil, nil)
}
