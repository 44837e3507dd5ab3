package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/intentius/boxbroker/internal/admin"
)

// runSecretRemote is `secret set|list|remove` through the admin API. It
// sets plain values only: a secret the broker mints or signs with is set
// where the store is (`secret set --kind`).
func runSecretRemote(ctx context.Context, c *cli, url, sub, box, name string, set secretSetting, yes bool) error {
	cl, err := c.adminClient(url)
	if err != nil {
		return err
	}
	switch sub {
	case "set":
		if set.kind != "" && set.kind != "plain" {
			return fmt.Errorf("%w: --kind %s with --admin-url: the admin API sets plain values only; run `boxbroker secret set --kind` where the broker's store is", errUsage, set.kind)
		}
		if set.host == "" {
			return fmt.Errorf("%w: secret set needs --host, the one base URL the secret may be sent to, as in --host https://api.example.com", errUsage)
		}
		value, err := c.readSecret(fmt.Sprintf("value of %s for box %s (not echoed): ", name, box))
		if err != nil {
			return err
		}
		defer clear(value)
		sv, err := cl.SetSecret(ctx, box, name, admin.SecretValue{Host: set.host, Value: string(value), BodyFields: set.fields, Rules: set.rules, Rate: set.rate})
		if err != nil {
			return remoteError(err)
		}
		printSecretSet(c, box, name, sv.Host, set.brokerURL, set.word, "", sv.BodyFields)
		printRules(c, name, sv.Rules, sv.Rate)
	case "remove":
		if !yes && !c.confirm(fmt.Sprintf("Remove the secret %s of box %s?", name, box)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		if err := cl.RemoveSecret(ctx, box, name); err != nil {
			return remoteError(err)
		}
		fmt.Fprintf(c.stdout, "removed secret %s of box %s\n", name, box)
	case "list":
		list, err := cl.ListSecrets(ctx, box)
		if err != nil {
			return remoteError(err)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SECRET\tKIND\tHOST\tSTATE\tUPDATED\tBODY FIELDS\tALLOWS\tRATE")
		for _, s := range list {
			kind, state := "plain", "-"
			if s.Kind != "" {
				kind, state = s.Kind, s.State
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(s.Name), safe(kind), safe(s.Host), safe(state), safe(s.UpdatedAt), safe(fieldsOrNone(s.BodyFields)), safe(rulesOrAny(s.Rules)), safe(orNone(s.Rate)))
		}
		return tw.Flush()
	}
	return nil
}
