package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/server"
)

func runCredential(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: credential set|list|remove anthropic|fountain", errUsage)
	}
	sub, args := args[0], args[1:]
	var cfg server.Config
	fs := c.flags("credential "+sub, &cfg)
	yes := fs.Bool("yes", false, "remove without asking")
	adminURL := c.adminURLFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	var id string
	switch sub {
	case "set", "remove":
		if len(args) != 1 || (args[0] != payer.SharedAnthropic && args[0] != payer.SharedFountain) {
			return fmt.Errorf("%w: credential %s takes anthropic or fountain; the value is read from stdin, never from arguments", errUsage, sub)
		}
		id = args[0]
	case "list":
	default:
		return fmt.Errorf("%w: unknown credential command %q (set, list, remove)", errUsage, sub)
	}
	if *adminURL != "" {
		return runCredentialRemote(ctx, c, *adminURL, sub, id, *yes)
	}
	switch sub {
	case "set":
		kind, err := c.setCredential(ctx, &cfg, id, fmt.Sprintf("%s credential (not echoed): ", id))
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "set %s credential (%s), sealed at rest\n", id, kind)
	case "remove":
		if !*yes && !c.confirm(fmt.Sprintf("Remove the %s credential?", id)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		if err := c.removeCredential(ctx, &cfg, id, fmt.Sprintf("no %s credential is set", id)); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "removed %s credential\n", id)
	case "list":
		st, err := openStore(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		creds, err := st.ListCredentials(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CREDENTIAL\tUPDATED")
		for _, cr := range creds {
			fmt.Fprintf(tw, "%s\t%s\n", cr.ID, cr.UpdatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return nil
}

// describe says what kind of credential value is, without any of it: the
// Fountain key is a bearer; every other credential is an Anthropic one.
func describe(id string, value []byte) string {
	if id == payer.SharedFountain {
		return "bearer key"
	}
	if proxy.IsSetupToken(value) {
		return "setup token, sent as a bearer with the " + proxy.OAuthBeta + " beta"
	}
	return "API key, sent as x-api-key"
}
