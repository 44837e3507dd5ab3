package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
)

// runBoxConsent is `box consent NAME [on|off]`: it records whether the
// box's owner consents to the broker keeping the box's feedback, or with
// no on|off prints what is recorded. A running broker sees the change at
// its next request, through the store's change log.
func runBoxConsent(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("box consent", &cfg)
	adminURL := c.adminURLFlag(fs)
	args, err := parseInterspersed(fs, args)
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
			return fmt.Errorf("%w: box consent %s takes on or off, not %q", errUsage, name, args[1])
		}
	}
	be, err := c.backend(ctx, &cfg, *adminURL, "box consent", false, false)
	if err != nil {
		return err
	}
	defer be.close()
	if len(args) == 1 {
		b, err := be.Box(ctx, name)
		if err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "box %s: consent %s\n", name, onOff(b.Consent))
		return nil
	}
	if _, err := be.UpdateBox(ctx, name, operator.BoxSettings{Consent: &on}); err != nil {
		return remoteError(err)
	}
	if on {
		fmt.Fprintf(c.stdout, "box %s: consent on; the broker keeps its feedback\n", name)
	} else {
		fmt.Fprintf(c.stdout, "box %s: consent off; the broker refuses its feedback with a 403 (batches kept before stay kept)\n", name)
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
