package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
)

// runBoxPause answers `box pause NAME` and `box resume NAME`. A paused box
// is refused every capability with a 403 saying so, while its declaration
// reports are still taken; a running broker sees the change at its next
// poll of the store's change log, on every replica.
func runBoxPause(ctx context.Context, c *cli, sub string, args []string) error {
	var cfg server.Config
	fs := c.flags("box "+sub, &cfg)
	adminURL := c.adminURLFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: box %s takes one NAME", errUsage, sub)
	}
	name := pos[0]
	if err := boxArg(name); err != nil {
		return err
	}
	pause := sub == "pause"
	be, err := c.backend(ctx, &cfg, *adminURL, "box "+sub, false, false)
	if err != nil {
		return err
	}
	defer be.close()
	b, err := be.Box(ctx, name)
	if err != nil {
		return remoteError(err)
	}
	if b.Paused == pause {
		fmt.Fprintf(c.stdout, "box %s is already %s\n", name, map[bool]string{true: "paused", false: "running"}[pause])
		return nil
	}
	if _, err := be.UpdateBox(ctx, name, operator.BoxSettings{Paused: &pause}); err != nil {
		return remoteError(err)
	}
	if pause {
		fmt.Fprintf(c.stdout, "paused box %s: every capability is refused with a 403 until `boxbroker box resume %s`; its declaration reports are still taken\n", name, name)
	} else {
		fmt.Fprintf(c.stdout, "resumed box %s\n", name)
	}
	return nil
}
