package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
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
	if !protocol.IsBoxName(name) {
		return fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, name)
	}
	pause := sub == "pause"
	if *adminURL != "" {
		return runBoxPauseRemote(ctx, c, *adminURL, name, pause)
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
	if b.Paused == pause {
		fmt.Fprintf(c.stdout, "box %s is already %s\n", name, map[bool]string{true: "paused", false: "running"}[pause])
		return nil
	}
	b.Paused = pause
	if err := st.UpdateBox(ctx, b); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no box named %s", name)
	} else if err != nil {
		return err
	}
	printPaused(c, name, pause)
	return nil
}

func printPaused(c *cli, name string, pause bool) {
	if pause {
		fmt.Fprintf(c.stdout, "paused box %s: every capability is refused with a 403 until `boxbroker box resume %s`; its declaration reports are still taken\n", name, name)
	} else {
		fmt.Fprintf(c.stdout, "resumed box %s\n", name)
	}
}
