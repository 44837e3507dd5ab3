package main

import (
	"bytes"
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
	switch sub {
	case "set", "remove", "list":
	default:
		return fmt.Errorf("%w: unknown credential command %q%s (set, list, remove)", errUsage, safe(sub), didYouMean(sub, []string{"set", "list", "remove"}))
	}
	var cfg server.Config
	fs := c.flags("credential "+sub, &cfg)
	yes := new(bool)
	if sub == "remove" {
		yes = fs.Bool("yes", false, "remove without asking")
	}
	adminURL := c.adminURLFlag(fs)
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	var id string
	switch sub {
	case "set":
		if len(args) != 1 || (args[0] != payer.SharedAnthropic && args[0] != payer.SharedFountain) {
			return fmt.Errorf("%w: credential set takes anthropic or fountain; the value is read from stdin, never from arguments", errUsage)
		}
		id = args[0]
	case "remove":
		if len(args) != 1 || (args[0] != payer.SharedAnthropic && args[0] != payer.SharedFountain) {
			return fmt.Errorf("%w: credential remove takes anthropic or fountain", errUsage)
		}
		id = args[0]
	case "list":
		if len(args) != 0 {
			return fmt.Errorf("%w: credential list takes no arguments", errUsage)
		}
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
		if kind == unlikelyAnthropic {
			c.warnUnlikelyAnthropic(id)
		}
	case "remove":
		if !*yes && !c.confirm(fmt.Sprintf("Remove the %s credential?", id)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		if err := c.removeCredential(ctx, &cfg, id, fmt.Sprintf("no %s credential is set", id)); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "removed %s credential\n", id)
	case "list":
		st, err := openExisting(ctx, &cfg)
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
			fmt.Fprintf(tw, "%s\t%s\n", safe(cr.ID), cr.UpdatedAt.UTC().Format(time.RFC3339))
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
	if !bytes.HasPrefix(value, []byte("sk-ant-")) {
		return unlikelyAnthropic
	}
	return "API key, sent as x-api-key"
}

// unlikelyAnthropic is what describe says of an Anthropic credential that
// starts like neither an API key (sk-ant-api…) nor a setup token
// (sk-ant-oat…).
const unlikelyAnthropic = "API key, sent as x-api-key; it does not look like an Anthropic key"

// warnUnlikelyAnthropic warns, without any of the value, that a credential
// stored for id looks like no Anthropic key or setup token.
func (c *cli) warnUnlikelyAnthropic(id string) {
	fmt.Fprintf(c.stderr, "warning: the %s credential does not start with sk-ant-, as Anthropic API keys (sk-ant-api…) and setup tokens (sk-ant-oat…) do; it was stored, and calls it pays for will fail if it is not one\n", id)
}
