package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/intentius/boxbroker/internal/admin"
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
	return call[operator.SecretView](ctx, c, http.MethodPut, secretPath(box, name), sv)
}

// SetSecretRules sets what a box's egress secret name may be spent on,
// its rules (none: every method and path) and rate ("" for none),
// keeping its value, host, kind and body fields; no value is sent.
func (c *Client) SetSecretRules(ctx context.Context, box, name string, rules []string, rate string) (operator.SecretView, error) {
	return call[operator.SecretView](ctx, c, http.MethodPut, secretPath(box, name)+"/rules", admin.SecretRules{Rules: rules, Rate: rate})
}

// RemoveSecret removes a box's egress secret name.
func (c *Client) RemoveSecret(ctx context.Context, box, name string) error {
	return c.do(ctx, http.MethodDelete, secretPath(box, name), nil, nil)
}

// secretPath is the admin API's path of a box's egress secret name.
func secretPath(box, name string) string {
	return "/api/boxes/" + url.PathEscape(box) + "/secrets/" + url.PathEscape(name)
}
