package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
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
	be, err := c.backend(ctx, &cfg, *adminURL, "visitor "+sub, false, sub != "remove")
	if err != nil {
		return err
	}
	defer be.close()
	switch sub {
	case "set":
		value, err := c.readRawCredential(*kind, fmt.Sprintf("%s's Anthropic key or setup token (not echoed): ", principal))
		if err != nil {
			return err
		}
		what := describe(payer.SharedAnthropic, value)
		if operator.IsCloud(*kind) {
			what = describeCloud(*kind, value)
		}
		_, err = be.SetVisitor(ctx, principal, *kind, value)
		clear(value)
		if err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "set %s's credential (%s), sealed at rest\n", principal, what)
	case "remove":
		if !*yes && !c.confirm(fmt.Sprintf("Remove %s's credential? Their grants stop paying at once.", principal)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		if err := be.RemoveVisitor(ctx, principal); err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "removed %s's credential\n", principal)
	case "list":
		vs, err := be.ListVisitors(ctx)
		if err != nil {
			return remoteError(err)
		}
		tw := table(c.stdout, "VISITOR\tKIND\tUPDATED")
		for _, v := range vs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(v.Principal), kindOrNot(v.Kind), v.UpdatedAt)
		}
		return tw.Flush()
	}
	return nil
}
