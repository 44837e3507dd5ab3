package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// runVisitor manages visitors' Anthropic credentials: `visitor set
// PRINCIPAL` (the credential read from stdin), `visitor remove PRINCIPAL`,
// `visitor list`.
func runVisitor(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: visitor set|list|remove PRINCIPAL", errUsage)
	}
	sub, args := args[0], args[1:]
	var cfg server.Config
	fs := c.flags("visitor "+sub, &cfg)
	yes := new(bool)
	if sub == "remove" {
		yes = fs.Bool("yes", false, "remove without asking")
	}
	kind := new(string)
	if sub == "set" {
		kind = fs.String("kind", cloud.KindAnthropic, "the credential's kind: anthropic (a key or setup token), bedrock or vertex (a cloud account's JSON on stdin; docs/cloud.md)")
	}
	adminURL := c.adminURLFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	var principal string
	switch sub {
	case "set", "remove":
		if len(pos) != 1 {
			return fmt.Errorf("%w: visitor %s takes one PRINCIPAL, such as github:<login>; the credential is read from stdin, never from arguments", errUsage, sub)
		}
		principal = pos[0]
		if sub == "set" {
			if err := checkPrincipal(principal); err != nil {
				return err
			}
		} else if !protocol.IsPrincipal(principal) {
			return fmt.Errorf("%w: %q is not a principal (1 to 200 characters, no white space, such as github:<login>)", errUsage, safe(principal))
		}
	case "list":
		if len(pos) != 0 {
			return fmt.Errorf("%w: visitor list takes no arguments", errUsage)
		}
	default:
		return fmt.Errorf("%w: unknown visitor command %q (set, list, remove)", errUsage, sub)
	}
	if *adminURL != "" {
		return runVisitorRemote(ctx, c, *adminURL, sub, principal, *kind, *yes)
	}
	id := payer.VisitorAnthropic(principal)
	switch sub {
	case "set":
		what, err := c.setCredential(ctx, &cfg, id, *kind, fmt.Sprintf("%s's Anthropic key or setup token (not echoed): ", principal))
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "set %s's credential (%s), sealed at rest\n", principal, what)
	case "remove":
		if !*yes && !c.confirm(fmt.Sprintf("Remove %s's credential? Their grants stop paying at once.", principal)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		if err := c.removeCredential(ctx, &cfg, id, fmt.Sprintf("%s holds no credential", principal)); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "removed %s's credential\n", principal)
	case "list":
		st, err := openExisting(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		creds, err := st.ListCredentials(ctx)
		if err != nil {
			return err
		}
		keyring, err := server.LoadKeyring(&cfg)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VISITOR\tKIND\tUPDATED")
		for _, cr := range creds {
			if p, ok := strings.CutPrefix(cr.ID, payer.VisitorPrefix); ok {
				kind := storedKind(ctx, st, keyring, cr.ID)
				fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(p), kindOrNot(kind), cr.UpdatedAt.UTC().Format(time.RFC3339))
			}
		}
		return tw.Flush()
	}
	return nil
}
