package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/admin/adminclient"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/payer"
)

// adminURLFlag adds --admin-url to fs: the admin API a command acts
// through instead of opening the store itself.
func (c *cli) adminURLFlag(fs *flag.FlagSet) *string {
	return fs.String("admin-url", c.getenv("BOXBROKER_ADMIN_URL"),
		"act through the admin API at this URL, authenticating with BOXBROKER_ADMIN_TOKEN, instead of opening the store (BOXBROKER_ADMIN_URL)")
}

// adminClient is a client for the admin API at url, with the token from
// BOXBROKER_ADMIN_TOKEN: never from an argument.
func (c *cli) adminClient(url string) (*adminclient.Client, error) {
	return adminclient.New(url, c.getenv("BOXBROKER_ADMIN_TOKEN"), nil)
}

// remoteError says an admin API refusal as the CLI says its own errors.
func remoteError(err error) error {
	var ae *adminclient.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s (%d)", safe(ae.Message), ae.Status)
	}
	return err
}

// describeCloud says what a cloud account of kind the broker took is, as
// describe says it: its region read from raw, the account's JSON, which
// the broker checked. It never says any other of raw.
func describeCloud(kind string, raw []byte) string {
	var a struct {
		Region string `json:"region"`
	}
	what := cloud.Name(kind) + " account"
	if json.Unmarshal(raw, &a) == nil && a.Region != "" {
		what += " in " + safe(a.Region)
	}
	return what + ", signed for each call"
}

// isCloudKind reports whether --kind names a cloud account.
func isCloudKind(kind string) bool { return kind == cloud.KindBedrock || kind == cloud.KindVertex }

// runCredentialRemote is `credential set|list|remove` through the admin
// API. A credential set is sent as read, with its kind: the broker checks
// it as `credential set` on the store does (operator.CheckCredential).
func runCredentialRemote(ctx context.Context, c *cli, url, sub, id, kind string, yes bool) error {
	cl, err := c.adminClient(url)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		creds, err := cl.ListCredentials(ctx)
		if err != nil {
			return remoteError(err)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CREDENTIAL\tKIND\tUPDATED")
		for _, cr := range creds {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(cr.ID), kindOrNot(cr.Kind), cr.UpdatedAt)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		entries, err := cl.Pool(ctx)
		if err != nil {
			return remoteError(err)
		}
		if len(entries) > 0 {
			return c.printPool(entries, true)
		}
	}
	return nil
}

// runPoolRemote adds or removes a pool entry through the admin API; an
// entry added is sent as read, with its kind, for the broker to check.
func runPoolRemote(ctx context.Context, c *cli, url, sub, name, kind string, weight int, baseURL string, yes bool) error {
	cl, err := c.adminClient(url)
	if err != nil {
		return err
	}
	if sub == "remove" {
		if !yes && !c.confirm(fmt.Sprintf("Remove the anthropic pool entry %s?", name)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		if err := cl.RemovePoolEntry(ctx, name); err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "removed anthropic pool entry %s\n", name)
		return nil
	}
	value, err := c.readRawCredential(kind, fmt.Sprintf("anthropic pool entry %s credential (not echoed): ", name))
	if err != nil {
		return err
	}
	defer clear(value)
	if !isCloudKind(kind) && describe(payer.SharedAnthropic, value) == unlikelyAnthropic {
		defer c.warnUnlikelyAnthropic("anthropic pool entry " + name)
	}
	v, err := cl.SetPoolEntry(ctx, name, kind, weight, baseURL, value)
	if err != nil {
		return remoteError(err)
	}
	what := v.Kind
	if isCloudKind(kind) {
		what = describeCloud(kind, value)
	}
	fmt.Fprintf(c.stdout, "set anthropic pool entry %s (%s, weight %d), sealed at rest\n", name, what, v.Weight)
	return nil
}

// parseViewTime reads a time the admin API wrote; zero for null.
func parseViewTime(v *string) time.Time {
	if v == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, *v)
	return t
}
