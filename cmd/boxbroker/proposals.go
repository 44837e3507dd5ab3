package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// proposalCommands are the commands of package approval: listing
// proposals, approving and denying them, and turning ask mode on.
func proposalCommands() map[string]command {
	return map[string]command{
		"proposals": {summary: "list refused requests waiting for a person: proposals [--box B] [--state pending|approved|denied|expired|all]", run: runProposals},
		"approve":   {summary: "approve a proposal: approve ID --for 15m|1h|7d|always", run: runApprove},
		"deny":      {summary: "deny a proposal: deny ID", run: runDeny},
		"ask":       {summary: "put a box's refusals in ask mode: ask BOX secret:NAME|hosts|budget [--off]", run: runAsk},
	}
}

// runProposals answers `proposals`: a table of proposals, pending ones
// by default.
func runProposals(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("proposals", &cfg)
	adminURL := c.adminURLFlag(fs)
	box := fs.String("box", "", "only this box's proposals")
	state := fs.String("state", store.ProposalPending, "pending, approved, denied, expired, or all")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: proposals takes no arguments (--box BOX to name a box)", errUsage)
	}
	if *state == "all" {
		*state = ""
	}
	be, err := c.backend(ctx, &cfg, *adminURL, "proposals", false, false)
	if err != nil {
		return err
	}
	defer be.close()
	list, err := be.ListProposals(ctx, *box, *state)
	if err != nil {
		return remoteError(err)
	}
	if len(list) == 0 {
		fmt.Fprintf(c.stdout, "no %sproposals\n", map[bool]string{true: *state + " ", false: ""}[*state != ""])
		return nil
	}
	tw := table(c.stdout, "ID\tBOX\tSTATE\tSEEN\tWHAT\tUNTIL")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", p.ID, p.Box, p.State, p.Count, safe(p.Attempted()), proposalUntil(p))
	}
	return tw.Flush()
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

// runApprove answers `approve ID --for DURATION`.
func runApprove(ctx context.Context, c *cli, args []string) error {
	return decide(ctx, c, "approve", args)
}

// runDeny answers `deny ID`.
func runDeny(ctx context.Context, c *cli, args []string) error { return decide(ctx, c, "deny", args) }

// decide approves (verb "approve") or denies (verb "deny") a proposal.
func decide(ctx context.Context, c *cli, verb string, args []string) error {
	var cfg server.Config
	fs := c.flags(verb, &cfg)
	adminURL := c.adminURLFlag(fs)
	forWords := new(string)
	if verb == "approve" {
		forWords = fs.String("for", "1h", "how long the approval lasts: 15m, 1h, 24h, 7d ... or always")
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: %s takes one proposal ID (`boxbroker proposals` lists them)", errUsage, verb)
	}
	if verb == "approve" {
		if _, _, err := approval.ParseFor(*forWords); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	be, err := c.backend(ctx, &cfg, *adminURL, verb, false, false)
	if err != nil {
		return err
	}
	defer be.close()
	if verb == "deny" {
		p, err := be.DenyProposal(ctx, pos[0])
		if err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "denied %s for box %s: %s\n", p.ID, p.Box, safe(p.Attempted()))
		return nil
	}
	p, err := be.ApproveProposal(ctx, pos[0], *forWords)
	if err != nil {
		return remoteError(err)
	}
	fmt.Fprintf(c.stdout, "approved %s for box %s (%s): %s; the box's same request succeeds\n", p.ID, p.Box, proposalUntil(p), safe(p.Attempted()))
	return nil
}

// runAsk answers `ask BOX SCOPE [--off]`.
func runAsk(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("ask", &cfg)
	adminURL := c.adminURLFlag(fs)
	off := fs.Bool("off", false, "stop asking: refuse as the rules say, opening no proposal")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: ask takes BOX and a scope: secret:NAME, hosts or budget", errUsage)
	}
	box, scope := pos[0], pos[1]
	if err := boxArg(box); err != nil {
		return err
	}
	if err := approval.CheckScope(scope); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	be, err := c.backend(ctx, &cfg, *adminURL, "ask", false, false)
	if err != nil {
		return err
	}
	defer be.close()
	asks, err := be.SetAsk(ctx, box, scope, !*off)
	if err != nil {
		return remoteError(err)
	}
	if *off {
		fmt.Fprintf(c.stdout, "box %s: refusals of %s open no proposal\n", box, safe(scope))
	} else {
		fmt.Fprintf(c.stdout, "box %s: a refusal of %s opens a proposal a person can approve (`boxbroker proposals`)\n", box, safe(scope))
	}
	if len(asks) > 0 {
		fmt.Fprintf(c.stdout, "box %s asks about: %s\n", box, safe(fmt.Sprint(asks)))
	}
	return nil
}
