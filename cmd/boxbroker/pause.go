package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/operator"
)

// runBoxPause answers `box pause NAME` and `box resume NAME`. A paused box
// is refused every capability with a 403 saying so, while its declaration
// reports are still taken; a running broker sees the change at its next
// poll of the store's change log, on every replica.
func runBoxPause(ctx context.Context, c *cli, sub string, args []string) error {
	cmd := c.command("box " + sub)
	pos, err := cmd.boxArgs(args, 1, "box %s takes one NAME", sub)
	if err != nil {
		return err
	}
	name, pause := pos[0], sub == "pause"
	return cmd.on(ctx, c, false, false, func(be *backend) error {
		b, err := be.Box(ctx, name)
		if err != nil {
			return err
		}
		if b.Paused == pause {
			fmt.Fprintf(c.stdout, "box %s is already %s\n", name, map[bool]string{true: "paused", false: "running"}[pause])
			return nil
		}
		_, err = be.UpdateBox(ctx, name, operator.BoxSettings{Paused: &pause})
		if pause {
			return c.did(err, "paused box %s: every capability is refused with a 403 until `boxbroker box resume %s`; its declaration reports are still taken", name, name)
		}
		return c.did(err, "resumed box %s", name)
	})
}
