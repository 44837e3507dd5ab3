package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/store"
)

// proposalCommands are the commands of package approval: listing
// proposals, approving and denying them, and turning ask mode on.
func proposalCommands() map[string]command {
	return map[string]command{
		"proposals": {summary: "list refused requests waiting for a person: proposals [--box B] [--state pending|approved|denied|expired|used|all]", run: runProposals},
		"approve":   {summary: "approve a proposal: approve ID --for 15m|1h|7d|always", run: decide("approve")},
		"deny":      {summary: "deny a proposal, or withdraw an approval: deny ID", run: decide("deny")},
		"ask":       {summary: "put a box's refusals in ask mode: ask BOX secret:NAME|hosts|budget [--off]", run: runAsk},
	}
}

// runProposals answers `proposals`: a table of proposals, pending ones
// by default.
func runProposals(ctx context.Context, c *cli, args []string) error {
	cmd := c.command("proposals")
	box := cmd.String("box", "", "only this box's proposals")
	state := cmd.String("state", store.ProposalPending, "pending, approved, denied, expired, used, or all")
	if _, err := cmd.args(args, 0, "proposals takes no arguments (--box BOX to name a box)"); err != nil {
		return err
	}
	if *state == "" || approval.CheckState(*state) != nil && *state != "all" {
		return fmt.Errorf("%w: --state %s: a state is pending, approved, denied, expired, used, or all", errUsage, quiet.Shown(*state, 64))
	}
	if *state == "all" {
		*state = ""
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error {
		list, err := be.ListProposals(ctx, *box, *state)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintf(c.stdout, "no %sproposals\n", map[bool]string{true: *state + " ", false: ""}[*state != ""])
			return nil
		}
		return rows(c.stdout, "ID\tBOX\tSTATE\tSEEN\tWHAT\tUNTIL", list, func(p operator.ProposalView) []any {
			return []any{p.ID, p.Box, p.State, p.Count, safe(p.Attempted()), proposalUntil(p)}
		})
	})
}

// proposalUntil is when a proposal's state ends: a pending one's expiry, an
// approval's end (or always); "-" otherwise.
func proposalUntil(p operator.ProposalView) string {
	switch p.State {
	case store.ProposalPending:
		return "expires " + p.ExpiresAt
	case store.ProposalApproved:
		if p.Until == nil {
			return "always"
		}
		return *p.Until
	}
	return "-"
}

// decide is the command that approves (verb "approve": `approve ID
// --for DURATION`) or denies (verb "deny": `deny ID`) a proposal.
func decide(verb string) func(ctx context.Context, c *cli, args []string) error {
	return func(ctx context.Context, c *cli, args []string) error {
		cmd := c.command(verb)
		forWords := new(string)
		if verb == "approve" {
			forWords = cmd.String("for", "1h", "how long the approval lasts: 15m, 1h, 24h, 7d ... or always")
		}
		pos, err := cmd.args(args, 1, "%s takes one proposal ID (`boxbroker proposals` lists them)", verb)
		if err != nil {
			return err
		}
		if verb == "approve" {
			if _, _, err := approval.ParseFor(*forWords); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
		}
		return cmd.on(ctx, c, false, false, func(be *backend) error {
			if verb == "deny" {
				p, err := be.DenyProposal(ctx, pos[0])
				return c.did(err, "denied %s for box %s: %s", p.ID, p.Box, safe(p.Attempted()))
			}
			p, err := be.ApproveProposal(ctx, pos[0], *forWords)
			until := proposalUntil(p)
			if p.Until != nil {
				until = "until " + until
			}
			return c.did(err, "approved %s for box %s (%s): %s; the box's same request succeeds", p.ID, p.Box, until, safe(p.Attempted()))
		})
	}
}

// runAsk answers `ask BOX SCOPE [--off]`.
func runAsk(ctx context.Context, c *cli, args []string) error {
	cmd := c.command("ask")
	off := cmd.Bool("off", false, "stop asking: refuse as the rules say, opening no proposal")
	pos, err := cmd.boxArgs(args, 2, "ask takes BOX and a scope: secret:NAME, hosts or budget")
	if err != nil {
		return err
	}
	box, scope := pos[0], pos[1]
	switch err := approval.CheckAsk(scope, !*off); {
	case errors.Is(err, approval.ErrBadSecretName):
		// A secret's name is upper-case: secret:github would never match
		// a refusal.
		name := strings.TrimPrefix(scope, approval.ScopeSecret)
		return fmt.Errorf("%w: %s: the secret's name %s must match ^[A-Z][A-Z0-9_]{0,39}$, as secret set takes it, such as secret:GITHUB", errUsage, quiet.Shown(scope, len(approval.ScopeSecret)+128), named(name))
	case err != nil:
		return fmt.Errorf("%w: %s: %w (hosts, budget, or secret:NAME)", errUsage, quiet.Shown(scope, len(approval.ScopeSecret)+128), approval.ErrBadScope)
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error {
		asks, err := be.SetAsk(ctx, box, scope, !*off)
		if err != nil {
			return err
		}
		if *off {
			fmt.Fprintf(c.stdout, "box %s: refusals of %s open no proposal\n", box, safe(scope))
		} else {
			fmt.Fprintf(c.stdout, "box %s: a refusal of %s opens a proposal a person can approve (`boxbroker proposals`)\n", box, safe(scope))
		}
		if len(asks) > 0 {
			fmt.Fprintf(c.stdout, "box %s asks about: %s\n", box, safe(fmt.Sprint(asks)))
		} else {
			fmt.Fprintf(c.stdout, "box %s asks about nothing; approvals already given hold until they end (`boxbroker deny ID` withdraws one)\n", box)
		}
		return nil
	})
}
