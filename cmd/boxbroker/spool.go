package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
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
	if args[0] != "dead" {
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
	cmd := c.command(strings.TrimSpace("spool dead " + sub))
	yes := yesFlag(cmd.FlagSet, sub == "drop", "drop")
	one := arity{1, "spool dead " + sub + " takes one ID (spool dead list shows them)"}
	pos, err := parseSub(cmd.FlagSet, args, sub, map[string]arity{"list": {0, "spool dead list takes no argument"}, "retry": one, "drop": one},
		fmt.Errorf("%w: %s", errUsage, spoolUsage))
	if err != nil {
		return err
	}
	if sub != "list" && pos[0] == "" {
		return fmt.Errorf("%w: %s", errUsage, one.usage)
	}
	if sub == "drop" {
		if err := c.sure(*yes, fmt.Sprintf("Drop dead letter %s, giving up the records it holds?", safe(pos[0])), "dropped", "drop"); err != nil {
			return err
		}
	}
	be, err := cmd.open(ctx, c, false, false)
	if err != nil && sub == "list" && *cmd.adminURL == "" {
		// The dead letters are files of the data directory, waiting for
		// the store: they are listed even when it does not open.
		views, lerr := operator.DeadLetterViews(operator.DeadDir{Dir: cmd.cfg.DataDir})
		if lerr != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "boxbroker spool dead list: the store did not open (%v); these are the data directory's dead letters\n", err)
		printDeadLetters(c, views)
		return nil
	}
	if err != nil {
		return err
	}
	defer be.close()
	switch sub {
	case "list":
		views, err := be.ListDeadLetters(ctx)
		if err != nil {
			return remoteError(err)
		}
		printDeadLetters(c, views)
		return nil
	case "retry":
		v, err := be.RetryDeadLetter(ctx, pos[0])
		return c.did(err, "dead letter %s applied to the store and removed", safe(v.ID))
	}
	return c.did(be.DropDeadLetter(ctx, pos[0]), "dead letter %s dropped; its records are given up", safe(pos[0]))
}

// printDeadLetters writes views as `spool dead list` does.
func printDeadLetters(c *cli, views []operator.DeadLetterView) {
	if len(views) == 0 {
		fmt.Fprintln(c.stdout, "no dead letters: the store has taken every batch it was given")
		return
	}
	_ = rows(c.stdout, "ID\tSET ASIDE\tSETTLEMENTS\tAUDIT\tBOXES\tREASON", views, func(v operator.DeadLetterView) []any {
		return []any{v.ID, v.At, v.Settlements, v.AuditEntries, safe(strings.Join(v.Boxes, ",")), safe(v.Reason)}
	})
}
