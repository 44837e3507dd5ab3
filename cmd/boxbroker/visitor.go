package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/quiet"
)

// runVisitor manages visitors' Anthropic credentials: `visitor set
// PRINCIPAL` (the credential read from stdin), `visitor remove PRINCIPAL`,
// `visitor list`.
func runVisitor(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	cmd := c.command("visitor " + sub)
	yes := yesFlag(cmd.FlagSet, sub == "remove", "remove")
	kind := new(string)
	if sub == "set" {
		kind = cmd.String("kind", cloud.KindAnthropic, "the credential's kind: anthropic (a key or setup token), bedrock or vertex (a cloud account's JSON on stdin; docs/cloud.md)")
	}
	one := arity{1, "visitor " + sub + " takes one PRINCIPAL, such as github:<login>; the credential is read from stdin, never from arguments"}
	pos, err := parseSub(cmd.FlagSet, args, sub, map[string]arity{"set": one, "remove": one, "list": {0, "visitor list takes no arguments"}},
		fmt.Errorf("%w: unknown visitor command %s (set, list, remove)", errUsage, named(sub)))
	if err != nil {
		return err
	}
	var principal string
	if sub != "list" {
		principal = pos[0]
		if sub == "set" {
			if err := checkPrincipal(principal); err != nil {
				return err
			}
		} else if !protocol.IsPrincipal(principal) {
			return fmt.Errorf("%w: %s is not a principal (1 to 200 characters, no white space, such as github:<login>)", errUsage, quiet.Shown(principal, protocol.MaxPrincipalLen))
		}
	}
	return cmd.on(ctx, c, false, sub != "remove", func(be *backend) error {
		switch sub {
		case "set":
			value, err := c.readRawCredential(*kind, fmt.Sprintf("%s's Anthropic key or setup token (not echoed): ", principal))
			if err != nil {
				return err
			}
			what := describe(payer.SharedAnthropic, *kind, value)
			_, err = be.SetVisitor(ctx, principal, *kind, value)
			clear(value)
			return c.did(err, "set %s's credential (%s), sealed at rest", principal, what)
		case "remove":
			if err := c.sure(*yes, fmt.Sprintf("Remove %s's credential? Their grants stop paying at once.", principal), "removed", "remove"); err != nil {
				return err
			}
			return c.did(be.RemoveVisitor(ctx, principal), "removed %s's credential", principal)
		}
		vs, err := be.ListVisitors(ctx)
		if err != nil {
			return err
		}
		return rows(c.stdout, "VISITOR\tKIND\tUPDATED", vs, func(v operator.VisitorView) []any { return []any{safe(v.Principal), kindOrNot(v.Kind), v.UpdatedAt} })
	})
}
