package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/operator"
)

// runBoxConsent is `box consent NAME [on|off]`: it records whether the
// box's owner consents to the broker keeping the box's feedback, or with
// no on|off prints what is recorded. A running broker sees the change at
// its next request, through the store's change log.
func runBoxConsent(ctx context.Context, c *cli, args []string) error {
	cmd := c.command("box consent")
	args, err := cmd.args(args, -1, "")
	if err != nil {
		return err
	}
	if len(args) != 1 && len(args) != 2 {
		return fmt.Errorf("%w: box consent NAME [on|off]", errUsage)
	}
	name := args[0]
	if err := boxArg(name); err != nil {
		return err
	}
	var on bool
	if len(args) == 2 {
		switch args[1] {
		case "on":
			on = true
		case "off":
		default:
			return fmt.Errorf("%w: box consent %s takes on or off, not %s", errUsage, name, named(args[1]))
		}
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error {
		if len(args) == 1 {
			b, err := be.Box(ctx, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "box %s: consent %s\n", name, map[bool]string{true: "on", false: "off"}[b.Consent])
			return nil
		}
		_, err := be.UpdateBox(ctx, name, operator.BoxSettings{Consent: &on})
		if on {
			return c.did(err, "box %s: consent on; the broker keeps its feedback", name)
		}
		return c.did(err, "box %s: consent off; the broker refuses its feedback with a 403 (batches kept before stay kept)", name)
	})
}
