package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/intentius/boxbroker/internal/operator"
)

// ListProposals lists proposals of box ("" for every box) in state (""
// for any), newest first.
func (c *Client) ListProposals(ctx context.Context, box, state string) ([]operator.ProposalView, error) {
	out, err := call[operator.ProposalList](ctx, c, http.MethodGet, "/api/proposals"+query("box", box, "state", state), nil)
	return out.Proposals, err
}

// ApproveProposal approves a pending proposal for forWords ("15m", "1h",
// "7d", "always").
func (c *Client) ApproveProposal(ctx context.Context, id, forWords string) (operator.ProposalView, error) {
	return call[operator.ProposalView](ctx, c, http.MethodPost, "/api/proposals/"+url.PathEscape(id)+"/approve", operator.Decision{For: forWords})
}

// DenyProposal denies a pending proposal.
func (c *Client) DenyProposal(ctx context.Context, id string) (operator.ProposalView, error) {
	return call[operator.ProposalView](ctx, c, http.MethodPost, "/api/proposals/"+url.PathEscape(id)+"/deny", nil)
}

// SetAsk turns a box's ask mode for scope on or off and returns the
// box's scopes in ask mode.
func (c *Client) SetAsk(ctx context.Context, box, scope string, on bool) ([]string, error) {
	method := http.MethodPut
	if !on {
		method = http.MethodDelete
	}
	out, err := call[operator.AskList](ctx, c, method, "/api/boxes/"+url.PathEscape(box)+"/asks/"+url.PathEscape(scope), nil)
	return out.Asks, err
}

// Asks returns the box's scopes in ask mode.
func (c *Client) Asks(ctx context.Context, box string) ([]string, error) {
	out, err := call[operator.AskList](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/asks", nil)
	return out.Asks, err
}
