package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// runBoxConsent is `box consent NAME [on|off]`: it records whether the
// box's owner consents to the broker keeping the box's feedback, or with
// no on|off prints what is recorded. A running broker sees the change at
// its next request, through the store's change log.
func runBoxConsent(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("box consent", &cfg)
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 1 && len(args) != 2 {
		return fmt.Errorf("%w: box consent NAME [on|off]", errUsage)
	}
	name := args[0]
	if !protocol.IsBoxName(name) {
		return fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, name)
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
	st, err := openExisting(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := st.Box(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no box named %s", name)
	}
	if err != nil {
		return err
	}
	if len(args) == 1 {
		fmt.Fprintf(c.stdout, "box %s: consent %s\n", name, onOff(b.Consent))
		return nil
	}
	b.Consent = on
	if err := st.UpdateBox(ctx, b); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no box named %s", name)
	} else if err != nil {
		return err
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
