package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
)

// runBoxPayer is `box payer NAME shared` or `box payer NAME owner
// [--principal github:<login>]`, the owner's Anthropic key or setup token
// read from stdin. Switching to shared removes the owner's credential.
func runBoxPayer(ctx context.Context, c *cli, args []string) error {
	cmd := c.command("box payer")
	principal := cmd.String("principal", "", "who the owner is, as github:<login>; said in the payer (owner only)")
	credKind := cmd.String("kind", cloud.KindAnthropic, "the owner's credential's kind: anthropic (a key or setup token), bedrock or vertex (a cloud account's JSON on stdin; docs/cloud.md)")
	pos, err := cmd.args(args, -1, "")
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[1] != protocol.PayerShared && pos[1] != protocol.PayerOwner) {
		return fmt.Errorf("%w: box payer NAME shared|owner [--principal github:<login>]; the owner's credential is read from stdin, never from arguments", errUsage)
	}
	name, kind := pos[0], pos[1]
	if err := boxArg(name); err != nil {
		return err
	}
	if kind == protocol.PayerShared && *principal != "" {
		return fmt.Errorf("%w: --principal names the owner; a shared payer has none", errUsage)
	}
	if *principal != "" {
		if err := checkPrincipal(*principal); err != nil {
			return err
		}
	}
	if *credKind != cloud.KindAnthropic && kind != protocol.PayerOwner {
		return fmt.Errorf("%w: --kind is the owner's credential's; a shared payer has none", errUsage)
	}
	set := operator.PayerSetting{Kind: kind}
	if *principal != "" {
		set.Principal = principal
	}
	what := ""
	if kind == protocol.PayerOwner {
		// Read before the store is opened, so a prompt does not hold it;
		// but not for a data directory that holds no boxbroker data.
		if *cmd.adminURL == "" {
			if err := needData(&cmd.cfg); err != nil {
				return err
			}
		}
		value, err := c.readRawCredential(*credKind, fmt.Sprintf("%s's owner's Anthropic key or setup token (not echoed): ", name))
		if err != nil {
			return err
		}
		what = describe(payer.SharedAnthropic, *credKind, value)
		if operator.IsCloud(*credKind) {
			set.CredentialKind = *credKind
		}
		set.Value = string(value)
		clear(value)
	}
	return cmd.on(ctx, c, false, kind == protocol.PayerOwner, func(be *backend) error {
		v, err := be.SetPayer(ctx, name, set)
		set.Value = ""
		if err != nil {
			return err
		}
		switch {
		case what != "":
			fmt.Fprintf(c.stderr, "set %s's owner's credential (%s), sealed at rest\n", name, what)
		case v.CredentialRemoved:
			fmt.Fprintf(c.stderr, "removed %s's owner's credential\n", name)
		default:
			fmt.Fprintf(c.stderr, "%s had no owner's credential to remove\n", name)
		}
		pay := protocol.Payer{Kind: v.Payer.Kind, Principal: v.Payer.Principal}
		fmt.Fprintf(c.stdout, "box %s is paid by: %s\n", name, protocol.FormatPayerHeader(pay))
		return nil
	})
}
