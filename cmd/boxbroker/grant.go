package main

import (
	"context"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/operator"
)

// runGrant manages grants: `grant issue BOX PRINCIPAL [--ttl 15m]` prints
// a grant's value once; `grant revoke ID`; `grant list BOX` shows no value.
func runGrant(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	cmd := c.command("grant " + sub)
	ttl := new(time.Duration)
	if sub == "issue" {
		ttl = cmd.Duration("ttl", grant.DefaultTTL, fmt.Sprintf("how long the grant holds, at most %v", grant.MaxTTL))
	}
	pos, err := parseSub(cmd.FlagSet, args, sub, map[string]arity{
		"issue": {2, "grant issue BOX PRINCIPAL [--ttl 15m]"}, "revoke": {1, "grant revoke ID (see grant list BOX)"}, "list": {1, "grant list BOX"},
	}, fmt.Errorf("%w: unknown grant command %s (issue, list, revoke)", errUsage, named(sub)))
	if err != nil {
		return err
	}
	if sub == "issue" {
		if *ttl <= 0 || *ttl > grant.MaxTTL {
			return fmt.Errorf("%w: --ttl %v: %v", errUsage, *ttl, grant.ErrTTL)
		}
		if err := checkPrincipal(pos[1]); err != nil {
			return err
		}
	}
	if sub != "revoke" {
		if err := boxArg(pos[0]); err != nil {
			return err
		}
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error { return runGrantOn(ctx, c, be, sub, pos, *ttl) })
}

// runGrantOn is `grant issue|list|revoke` on be; pos and ttl are checked.
func runGrantOn(ctx context.Context, c *cli, be *backend, sub string, pos []string, ttl time.Duration) error {
	switch sub {
	case "issue":
		box, principal := pos[0], pos[1]
		ig, err := be.IssueGrant(ctx, box, operator.NewGrant{Principal: principal, TTL: ttl.String()})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "grant %s for %s on box %s, until %s. Its value is shown this once; give it to %s and nowhere else.\n",
			ig.Grant.ID, principal, box, orNever(ig.Grant.ExpiresAt), principal)
		if !ig.VisitorCredential {
			fmt.Fprintf(c.stderr, "warning: %s holds no credential here, so the grant pays for nothing until `boxbroker visitor set %s`.\n", principal, principal)
		}
		fmt.Fprintln(c.stdout, ig.Value)
	case "revoke":
		return c.did(be.RevokeGrant(ctx, pos[0]), "revoked grant %s", pos[0])
	case "list":
		gs, err := be.ListGrants(ctx, pos[0])
		if err != nil {
			return err
		}
		return rows(c.stdout, "GRANT\tPRINCIPAL\tISSUED\tEXPIRES\tSTATE", gs, func(g operator.GrantView) []any {
			state := g.State
			if g.RevokedAt != nil {
				state += " " + *g.RevokedAt
			}
			return []any{g.ID, safe(g.Principal), g.IssuedAt, orNever(g.ExpiresAt), state}
		})
	}
	return nil
}

// orNever is when a grant expires, "never" for nil.
func orNever(at *string) string {
	if at == nil {
		return "never"
	}
	return *at
}
