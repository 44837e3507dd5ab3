package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/store"
)

// maxResourceID bounds a Fountain id an operator assigns.
const maxResourceID = 512

// runBoxResources is `box assign|unassign NAME KIND ID` and
// `box resources NAME`: which Fountain sandboxes, vaults and conversations
// are the box's. A request naming an id recorded as another box's, or as
// no box's, is refused (see docs/fountain.md).
func runBoxResources(ctx context.Context, c *cli, sub string, args []string) error {
	cmd := c.command("box " + sub)
	usage := "box " + sub + " NAME sandbox|vault|conversation ID"
	want := 3
	if sub == "resources" {
		usage, want = "box resources NAME", 1
	}
	args, err := cmd.boxArgs(args, want, "%s", usage)
	if err != nil {
		return err
	}
	name := args[0]
	var kind, id string
	if sub != "resources" {
		kind, id = args[1], args[2]
		switch kind {
		case store.ResourceSandbox, store.ResourceVault, store.ResourceConversation:
		default:
			return fmt.Errorf("%w: kind %s is not sandbox, vault or conversation", errUsage, named(kind))
		}
		if err := checkResourceID(id); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error {
		switch sub {
		case "assign":
			_, err := be.AddResource(ctx, name, operator.NewResource{Kind: kind, ID: id})
			return c.did(err, "%s %s is box %s's", kind, id, name)
		case "unassign":
			return c.did(be.RemoveResource(ctx, name, kind, id), "%s %s is no longer box %s's; the box's requests naming it are refused", kind, id, name)
		}
		rs, err := be.ListResources(ctx, name)
		if err != nil {
			return err
		}
		return rows(c.stdout, "KIND\tID\tSINCE", rs, func(r operator.ResourceView) []any { return []any{safe(r.Kind), safe(r.ID), r.At} })
	})
}

// checkResourceID refuses an id that could not be named as one segment of
// a Fountain path, so it could never match a request.
func checkResourceID(id string) error {
	if id == "" || id == "." || id == ".." || len(id) > maxResourceID {
		return fmt.Errorf("id %s must be 1 to %d characters, and neither \".\" nor \"..\"", quiet.Shown(id, maxResourceID), maxResourceID)
	}
	for _, r := range id {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("id %s holds a slash, backslash or control character", quiet.Shown(id, maxResourceID))
		}
	}
	return nil
}
