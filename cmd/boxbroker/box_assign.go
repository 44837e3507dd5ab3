package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

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
	st, err := openExisting(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Box(ctx, name); errors.Is(err, store.ErrNotFound) {
		return errors.New(operator.NoBox(name))
	} else if err != nil {
		return err
	}
	switch sub {
	case "assign":
		err := st.AddResource(ctx, store.Resource{Box: name, Kind: kind, ID: id, At: time.Now().UTC()})
		if errors.Is(err, store.ErrExists) {
			owner, oerr := st.ResourceOwner(ctx, kind, id)
			if oerr != nil {
				return fmt.Errorf("%s %s is already another box's", kind, id)
			}
			return fmt.Errorf("%s %s is already box %s's; unassign it there first (`boxbroker box unassign %s %s %s`)", kind, id, owner, owner, kind, id)
		}
		if errors.Is(err, store.ErrNotFound) {
			return errors.New(operator.NoBox(name))
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%s %s is box %s's\n", kind, id, name)
	case "unassign":
		owner, err := st.ResourceOwner(ctx, kind, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%s %s is no box's", kind, id)
		}
		if err != nil {
			return err
		}
		if owner != name {
			return fmt.Errorf("%s %s is box %s's, not box %s's", kind, id, owner, name)
		}
		if err := st.DeleteResource(ctx, kind, id); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%s %s is no box's", kind, id)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%s %s is no longer box %s's; the box's requests naming it are refused\n", kind, id, name)
	case "resources":
		rs, err := st.ListResources(ctx, name)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tID\tSINCE")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(r.Kind), safe(r.ID), r.At.UTC().Format(time.RFC3339))
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
