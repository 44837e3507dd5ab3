package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/protocol"
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

// localApprovals opens the store cfg names and a Service over it.
func localApprovals(ctx context.Context, cfg *server.Config) (*approval.Service, store.Store, error) {
	st, err := openExisting(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	svc, err := approval.New(approval.Config{Store: st})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return svc, st, nil
}

// auditLocal records a decision made through the CLI on its own store.
func auditLocal(ctx context.Context, st store.Store, box, route, message string) error {
	return st.AddAudit(ctx, []store.AuditEntry{{Box: box, At: time.Now().UTC(), Method: "SET", Route: route,
		Capability: store.ActorAdmin, Status: 200, Message: message}})
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
	var list []admin.ProposalView
	if *adminURL != "" {
		cl, err := c.adminClient(*adminURL)
		if err != nil {
			return err
		}
		if list, err = cl.ListProposals(ctx, *box, *state); err != nil {
			return remoteError(err)
		}
	} else {
		svc, st, err := localApprovals(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		ps, err := svc.List(ctx, *box, *state)
		if err != nil {
			return err
		}
		for _, p := range ps {
			list = append(list, admin.ProposalViewOf(p))
		}
	}
	if len(list) == 0 {
		fmt.Fprintf(c.stdout, "no %sproposals\n", map[bool]string{true: *state + " ", false: ""}[*state != ""])
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBOX\tSTATE\tSEEN\tWHAT\tUNTIL")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", p.ID, p.Box, p.State, p.Count, safe(attemptedView(p)), proposalUntil(p))
	}
	return tw.Flush()
}

// attemptedView is admin.Attempted of a proposal as the admin API wrote it.
func attemptedView(p admin.ProposalView) string {
	return admin.Attempted(store.Proposal{Kind: p.Kind, Secret: p.Secret, Method: p.Method, Path: p.Path, Host: p.Host, Model: p.Model, Amount: p.Amount})
}

// proposalUntil is when a proposal's state ends: a pending one's expiry, an
// approval's end (or always); "-" otherwise.
func proposalUntil(p admin.ProposalView) string {
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
	var cfg server.Config
	fs := c.flags("approve", &cfg)
	adminURL := c.adminURLFlag(fs)
	forWords := fs.String("for", "1h", "how long the approval lasts: 15m, 1h, 24h, 7d ... or always")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: approve takes one proposal ID (`boxbroker proposals` lists them)", errUsage)
	}
	if _, _, err := approval.ParseFor(*forWords); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var p admin.ProposalView
	if *adminURL != "" {
		cl, err := c.adminClient(*adminURL)
		if err != nil {
			return err
		}
		if p, err = cl.ApproveProposal(ctx, pos[0], *forWords); err != nil {
			return remoteError(err)
		}
	} else {
		svc, st, err := localApprovals(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		sp, err := admin.Approve(ctx, svc, pos[0], *forWords, "cli")
		if err != nil {
			return decisionError(pos[0], err)
		}
		if err := auditLocal(ctx, st, sp.Box, "boxbroker approve", admin.ApprovedMessage(sp)); err != nil {
			return err
		}
		p = admin.ProposalViewOf(sp)
	}
	fmt.Fprintf(c.stdout, "approved %s for box %s (%s): %s; the box's same request succeeds\n", p.ID, p.Box, proposalUntil(p), safe(attemptedView(p)))
	return nil
}

// runDeny answers `deny ID`.
func runDeny(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("deny", &cfg)
	adminURL := c.adminURLFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: deny takes one proposal ID (`boxbroker proposals` lists them)", errUsage)
	}
	var p admin.ProposalView
	if *adminURL != "" {
		cl, err := c.adminClient(*adminURL)
		if err != nil {
			return err
		}
		if p, err = cl.DenyProposal(ctx, pos[0]); err != nil {
			return remoteError(err)
		}
	} else {
		svc, st, err := localApprovals(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		sp, err := svc.Deny(ctx, pos[0], "cli")
		if err != nil {
			return decisionError(pos[0], err)
		}
		if err := auditLocal(ctx, st, sp.Box, "boxbroker deny", "denied proposal "+sp.ID+": "+admin.Attempted(sp)); err != nil {
			return err
		}
		p = admin.ProposalViewOf(sp)
	}
	fmt.Fprintf(c.stdout, "denied %s for box %s: %s\n", p.ID, p.Box, safe(attemptedView(p)))
	return nil
}

// decisionError says why a proposal could not be decided.
func decisionError(id string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("no proposal %s (`boxbroker proposals --state all` lists them)", safe(id))
	case errors.Is(err, store.ErrNotPending):
		return fmt.Errorf("proposal %s is no longer waiting: it was approved, denied, or expired unanswered", safe(id))
	}
	return err
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
	if !protocol.IsBoxName(box) {
		return fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, box)
	}
	if err := approval.CheckScope(scope); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var asks []string
	if *adminURL != "" {
		cl, err := c.adminClient(*adminURL)
		if err != nil {
			return err
		}
		if asks, err = cl.SetAsk(ctx, box, scope, !*off); err != nil {
			return remoteError(err)
		}
	} else {
		svc, st, err := localApprovals(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := svc.SetAsk(ctx, box, scope, !*off); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no box named %s", box)
		} else if err != nil {
			return err
		}
		msg := "asks about " + scope
		if *off {
			msg = "stops asking about " + scope
		}
		if err := auditLocal(ctx, st, box, "boxbroker ask", msg); err != nil {
			return err
		}
		if asks, err = svc.Asks(ctx, box); err != nil {
			return err
		}
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
