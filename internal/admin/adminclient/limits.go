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
	return call[[]operator.WindowBudgetView](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/window-budgets", nil)
}

// SetWindowBudget sets a box's budget over a window.
func (c *Client) SetWindowBudget(ctx context.Context, box string, set operator.WindowBudgetSetting) ([]operator.WindowBudgetView, error) {
	return call[[]operator.WindowBudgetView](ctx, c, http.MethodPut, "/api/boxes/"+url.PathEscape(box)+"/window-budgets", set)
}

// RemoveWindowBudget removes a box's budget over window: its own when
// principal is "".
func (c *Client) RemoveWindowBudget(ctx context.Context, box, principal, window string) error {
	return c.do(ctx, http.MethodDelete, "/api/boxes/"+url.PathEscape(box)+"/window-budgets"+query("principal", principal, "window", window), nil, nil)
}

// RateLimits returns a box's rate limits.
func (c *Client) RateLimits(ctx context.Context, box string) ([]operator.RateLimitView, error) {
	return call[[]operator.RateLimitView](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/rate-limits", nil)
}

// SetRateLimit sets a box's rate limit (its own when set.Principal is
// nil).
func (c *Client) SetRateLimit(ctx context.Context, box string, set operator.RateLimitView) (operator.RateLimitView, error) {
	return call[operator.RateLimitView](ctx, c, http.MethodPut, "/api/boxes/"+url.PathEscape(box)+"/rate-limits", set)
}

// RemoveRateLimit removes a box's rate limit: its own when principal is "".
func (c *Client) RemoveRateLimit(ctx context.Context, box, principal string) error {
	return c.do(ctx, http.MethodDelete, "/api/boxes/"+url.PathEscape(box)+"/rate-limits"+query("principal", principal), nil, nil)
}
