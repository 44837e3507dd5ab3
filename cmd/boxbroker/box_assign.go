package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// maxResourceID bounds a Fountain id an operator assigns.
const maxResourceID = 512

// runBoxResources is `box assign|unassign NAME KIND ID` and
// `box resources NAME`: which Fountain sandboxes, vaults and conversations
// are the box's. A request naming an id recorded as another box's, or as
// no box's, is refused (see docs/fountain.md).
func runBoxResources(ctx context.Context, c *cli, sub string, args []string) error {
	var cfg server.Config
	fs := c.flags("box "+sub, &cfg)
	adminURL := c.adminURLFlag(fs)
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	want := 3
	if sub == "resources" {
		want = 1
	}
	if len(args) != want {
		if sub == "resources" {
			return fmt.Errorf("%w: box resources NAME", errUsage)
		}
		return fmt.Errorf("%w: box %s NAME sandbox|vault|conversation ID", errUsage, sub)
	}
	name := args[0]
	if err := boxArg(name); err != nil {
		return err
	}
	var kind, id string
	if sub != "resources" {
		kind, id = args[1], args[2]
		switch kind {
		case store.ResourceSandbox, store.ResourceVault, store.ResourceConversation:
		default:
			return fmt.Errorf("%w: kind %q is not sandbox, vault or conversation", errUsage, kind)
		}
		if err := checkResourceID(id); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	be, err := c.backend(ctx, &cfg, *adminURL, "box "+sub, false, false)
	if err != nil {
		return err
	}
	defer be.close()
	switch sub {
	case "assign":
		if _, err := be.AddResource(ctx, name, operator.NewResource{Kind: kind, ID: id}); err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "%s %s is box %s's\n", kind, id, name)
	case "unassign":
		if err := be.RemoveResource(ctx, name, kind, id); err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "%s %s is no longer box %s's; the box's requests naming it are refused\n", kind, id, name)
	case "resources":
		rs, err := be.ListResources(ctx, name)
		if err != nil {
			return remoteError(err)
		}
		tw := table(c.stdout, "KIND\tID\tSINCE")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(r.Kind), safe(r.ID), r.At)
		}
		return tw.Flush()
	}
	return nil
}

// checkResourceID refuses an id that could not be named as one segment of
// a Fountain path, so it could never match a request.
func checkResourceID(id string) error {
	if id == "" || id == "." || id == ".." || len(id) > maxResourceID {
		return fmt.Errorf("id %q must be 1 to %d characters, and neither \".\" nor \"..\"", id, maxResourceID)
	}
	for _, r := range id {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("id %q holds a slash, backslash or control character", id)
		}
	}
	return nil
}
