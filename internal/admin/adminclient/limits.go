package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/intentius/boxbroker/internal/operator"
)

// WindowBudgets returns a box's budgets over days, weeks and rolling
// windows, and where they stand now.
func (c *Client) WindowBudgets(ctx context.Context, box string) ([]operator.WindowBudgetView, error) {
	var out []operator.WindowBudgetView
	err := c.do(ctx, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/window-budgets", nil, &out)
	return out, err
}

// SetWindowBudget sets a box's budget over a window.
func (c *Client) SetWindowBudget(ctx context.Context, box string, set operator.WindowBudgetSetting) ([]operator.WindowBudgetView, error) {
	var out []operator.WindowBudgetView
	err := c.do(ctx, http.MethodPut, "/api/boxes/"+url.PathEscape(box)+"/window-budgets", set, &out)
	return out, err
}

// RemoveWindowBudget removes a box's budget over window: its own when
// principal is "".
func (c *Client) RemoveWindowBudget(ctx context.Context, box, principal, window string) error {
	q := url.Values{"window": {window}}
	if principal != "" {
		q.Set("principal", principal)
	}
	return c.do(ctx, http.MethodDelete, "/api/boxes/"+url.PathEscape(box)+"/window-budgets?"+q.Encode(), nil, nil)
}

// RateLimits returns a box's rate limits.
func (c *Client) RateLimits(ctx context.Context, box string) ([]operator.RateLimitView, error) {
	var out []operator.RateLimitView
	err := c.do(ctx, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/rate-limits", nil, &out)
	return out, err
}

// SetRateLimit sets a box's rate limit (its own when set.Principal is
// nil).
func (c *Client) SetRateLimit(ctx context.Context, box string, set operator.RateLimitView) (operator.RateLimitView, error) {
	var out operator.RateLimitView
	err := c.do(ctx, http.MethodPut, "/api/boxes/"+url.PathEscape(box)+"/rate-limits", set, &out)
	return out, err
}

// RemoveRateLimit removes a box's rate limit: its own when principal is "".
func (c *Client) RemoveRateLimit(ctx context.Context, box, principal string) error {
	path := "/api/boxes/" + url.PathEscape(box) + "/rate-limits"
	if principal != "" {
		path += "?" + url.Values{"principal": {principal}}.Encode()
	}
	return c.do(ctx, http.MethodDelete, path, nil, nil)
}
