package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// runGrant manages grants: `grant issue BOX PRINCIPAL [--ttl 15m]` prints
// a grant's value once; `grant revoke ID`; `grant list BOX` shows no value.
func runGrant(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: grant issue BOX PRINCIPAL [--ttl 15m] | revoke ID | list BOX", errUsage)
	}
	sub, args := args[0], args[1:]
	var cfg server.Config
	fs := c.flags("grant "+sub, &cfg)
	ttl := new(time.Duration)
	if sub == "issue" {
		ttl = fs.Duration("ttl", grant.DefaultTTL, fmt.Sprintf("how long the grant holds, at most %v", grant.MaxTTL))
	}
	adminURL := c.adminURLFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	boxArg := func() (string, error) {
		if !protocol.IsBoxName(pos[0]) {
			return "", fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, pos[0])
		}
		return pos[0], nil
	}
	switch sub {
	case "issue":
		if len(pos) != 2 {
			return fmt.Errorf("%w: grant issue BOX PRINCIPAL [--ttl 15m]", errUsage)
		}
		if *ttl <= 0 || *ttl > grant.MaxTTL {
			return fmt.Errorf("%w: --ttl %v: %v", errUsage, *ttl, grant.ErrTTL)
		}
		if err := checkPrincipal(pos[1]); err != nil {
			return err
		}
	case "revoke":
		if len(pos) != 1 {
			return fmt.Errorf("%w: grant revoke ID (see grant list BOX)", errUsage)
		}
	case "list":
		if len(pos) != 1 {
			return fmt.Errorf("%w: grant list BOX", errUsage)
		}
	default:
		return fmt.Errorf("%w: unknown grant command %q (issue, list, revoke)", errUsage, sub)
	}
	if sub != "revoke" {
		if _, err := boxArg(); err != nil {
			return err
		}
	}
	if *adminURL != "" {
		return runGrantRemote(ctx, c, *adminURL, sub, pos, *ttl)
	}
	st, err := openExisting(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC()
	switch sub {
	case "issue":
		box, principal := pos[0], pos[1]
		value, g, err := grant.Issue(ctx, st, box, principal, *ttl, now)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no box named %s", box)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "grant %s for %s on box %s, until %s. Its value is shown this once; give it to %s and nowhere else.\n",
			g.ID, principal, box, g.ExpiresAt.Format(time.RFC3339), principal)
		if _, err := st.Credential(ctx, payer.VisitorAnthropic(principal)); errors.Is(err, store.ErrNotFound) {
			fmt.Fprintf(c.stderr, "warning: %s holds no credential here, so the grant pays for nothing until `boxbroker visitor set %s`.\n", principal, principal)
		}
		fmt.Fprintln(c.stdout, value)
	case "revoke":
		if err := st.RevokeGrant(ctx, pos[0], now); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no grant %s", pos[0])
		} else if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "revoked grant %s\n", pos[0])
	case "list":
		box := pos[0]
		if _, err := st.Box(ctx, box); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no box named %s", box)
		} else if err != nil {
			return err
		}
		gs, err := st.ListGrants(ctx, box)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GRANT\tPRINCIPAL\tISSUED\tEXPIRES\tSTATE")
		for _, g := range gs {
			state := "active"
			switch grant.Check(g, box, now) {
			case grant.Revoked:
				state = "revoked " + g.RevokedAt.UTC().Format(time.RFC3339)
			case grant.Expired:
				state = "expired"
			}
			expires := "never"
			if !g.ExpiresAt.IsZero() {
				expires = g.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.ID, safe(g.Principal), g.CreatedAt.UTC().Format(time.RFC3339), expires, state)
		}
		return tw.Flush()
	}
	return nil
}
