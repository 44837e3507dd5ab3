package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/server"
)

// spoolUsage is how `spool` is called.
const spoolUsage = "spool dead list | spool dead retry ID | spool dead drop ID [--yes]"

// runSpool answers `spool dead list|retry ID|drop ID`: the batches of
// records (settlements, audit entries) the store refused for good, set
// aside in the data directory as dead letters, so that the batches behind
// them were replayed. list shows them with the store's reason; retry
// applies one to the store (once what it refused is fixed), removing it
// once taken; drop removes one, giving up its records. With --admin-url
// they act on the replica that admin API serves, whose data directory
// holds them.
func runSpool(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 || args[0] != "dead" {
		return fmt.Errorf("%w: %s", errUsage, spoolUsage)
	}
	args = args[1:]
	args = wordFirst(args, func(a string) bool { return a == "list" || a == "retry" || a == "drop" })
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, spoolUsage)
	}
	sub := args[0]
	if strings.HasPrefix(sub, "-") {
		sub = "" // flags alone, as spool dead -h: the usage of all three
	} else {
		args = args[1:]
	}
	var cfg server.Config
	fs := c.flags(strings.TrimSpace("spool dead "+sub), &cfg)
	adminURL := c.adminURLFlag(fs)
	yes := new(bool)
	if sub == "drop" {
		yes = fs.Bool("yes", false, "drop without asking")
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return fmt.Errorf("%w: spool dead list takes no argument", errUsage)
		}
	case "retry", "drop":
		if len(pos) != 1 || pos[0] == "" {
			return fmt.Errorf("%w: spool dead %s takes one ID (spool dead list shows them)", errUsage, sub)
		}
	default:
		return fmt.Errorf("%w: %s", errUsage, spoolUsage)
	}
	if sub == "drop" && !*yes && !c.confirm(fmt.Sprintf("Drop dead letter %s, giving up the records it holds?", safe(pos[0]))) {
		return errors.New("not dropped (pass --yes to drop without asking)")
	}
	if *adminURL != "" {
		return runSpoolRemote(ctx, c, *adminURL, sub, pos)
	}
	cfg.Defaults()
	var view admin.DeadLetterView
	switch sub {
	case "list":
		list, err := outbox.ListDead(cfg.DataDir)
		if err != nil {
			return err
		}
		views := make([]admin.DeadLetterView, 0, len(list))
		for _, d := range list {
			views = append(views, admin.DeadLetterViewOf(d))
		}
		printDeadLetters(c, views)
		return nil
	case "drop":
		d, err := outbox.DropDead(cfg.DataDir, pos[0])
		if err != nil {
			return deadCLIError(err)
		}
		view = admin.DeadLetterViewOf(d)
	case "retry":
		st, err := openExisting(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		id, err := st.Identity(ctx)
		if err != nil {
			return err
		}
		d, err := outbox.RetryDead(ctx, cfg.DataDir, st, id, pos[0])
		if err != nil {
			return deadCLIError(err)
		}
		view = admin.DeadLetterViewOf(d)
	}
	printDeadDone(c, sub, view.ID)
	return nil
}

// runSpoolRemote is `spool dead` through the admin API.
func runSpoolRemote(ctx context.Context, c *cli, url, sub string, pos []string) error {
	cl, err := c.adminClient(url)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		views, err := cl.ListDeadLetters(ctx)
		if err != nil {
			return remoteError(err)
		}
		printDeadLetters(c, views)
		return nil
	case "retry":
		v, err := cl.RetryDeadLetter(ctx, pos[0])
		if err != nil {
			return remoteError(err)
		}
		printDeadDone(c, sub, v.ID)
	case "drop":
		if err := cl.DropDeadLetter(ctx, pos[0]); err != nil {
			return remoteError(err)
		}
		printDeadDone(c, sub, pos[0])
	}
	return nil
}

func printDeadLetters(c *cli, views []admin.DeadLetterView) {
	if len(views) == 0 {
		fmt.Fprintln(c.stdout, "no dead letters: the store has taken every batch it was given")
		return
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSET ASIDE\tSETTLEMENTS\tAUDIT\tBOXES\tREASON")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", v.ID, v.At, v.Settlements, v.AuditEntries,
			safe(strings.Join(v.Boxes, ",")), safe(v.Reason))
	}
	tw.Flush()
}

func printDeadDone(c *cli, sub, id string) {
	if sub == "retry" {
		fmt.Fprintf(c.stdout, "dead letter %s applied to the store and removed\n", safe(id))
		return
	}
	fmt.Fprintf(c.stdout, "dead letter %s dropped; its records are given up\n", safe(id))
}

// deadCLIError says a dead letter's error for the CLI.
func deadCLIError(err error) error {
	switch {
	case errors.Is(err, outbox.ErrNoDead):
		return fmt.Errorf("%w (boxbroker spool dead list shows them)", err)
	case outbox.Refused(err):
		return fmt.Errorf("the store refused the batch again, and it is kept: %w; fix what it refuses, or drop it", err)
	}
	return err
}
