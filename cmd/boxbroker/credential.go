package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/proxy"
)

func runCredential(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	switch sub {
	case "set", "add", "remove", "list":
	default:
		return unknownWord("credential", sub, "set", "add", "list", "remove")
	}
	cmd := c.command("credential " + sub)
	fs := cmd.FlagSet
	yes := yesFlag(fs, sub == "remove", "remove")
	weight, baseURL, kind := new(int), new(string), new(string)
	if sub == "set" || sub == "add" {
		kind = fs.String("kind", cloud.KindAnthropic, "the anthropic credential's kind: anthropic (a key or setup token), bedrock or vertex (a cloud account's JSON on stdin; docs/cloud.md)")
	}
	if sub == "add" {
		weight = fs.Int("weight", 1, fmt.Sprintf("the entry's share of the boxes, 1 to %d", pool.MaxWeight))
		baseURL = fs.String("url", "", "an Anthropic-compatible base URL for this entry; empty for serve's --anthropic-url")
	}
	args, err := cmd.args(args, -1, "")
	if err != nil {
		return err
	}
	var id, entry string
	switch sub {
	case "set":
		if len(args) != 1 || (args[0] != payer.SharedAnthropic && args[0] != payer.SharedFountain) {
			return fmt.Errorf("%w: credential set takes anthropic or fountain; the value is read from stdin, never from arguments", errUsage)
		}
		id = args[0]
	case "add":
		if len(args) != 2 || args[0] != payer.SharedAnthropic {
			return fmt.Errorf("%w: credential add takes anthropic and the entry's name (credential add anthropic NAME [--weight N] [--url URL]); the value is read from stdin, never from arguments", errUsage)
		}
		id, entry = args[0], args[1]
		u, err := pool.CheckEntry(entry, *weight, *baseURL)
		if err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		*baseURL = u
	case "remove":
		switch {
		case len(args) == 1 && (args[0] == payer.SharedAnthropic || args[0] == payer.SharedFountain):
			id = args[0]
		case len(args) == 2 && args[0] == payer.SharedAnthropic && pool.ValidName(args[1]):
			id, entry = args[0], args[1]
		default:
			return fmt.Errorf("%w: credential remove takes anthropic or fountain, or anthropic and a pool entry's name", errUsage)
		}
	case "list":
		if len(args) != 0 {
			return fmt.Errorf("%w: credential list takes no arguments", errUsage)
		}
	}
	if *kind != cloud.KindAnthropic && *kind != "" && id == payer.SharedFountain {
		return fmt.Errorf("%w: --kind is for the anthropic credential; the fountain key is a bearer", errUsage)
	}
	if *kind != cloud.KindAnthropic && *kind != "" && *baseURL != "" {
		return fmt.Errorf("%w: --url is an Anthropic-compatible base URL; a %s account's endpoint goes in its JSON", errUsage, *kind)
	}
	if entry == pool.Default {
		if sub == "add" {
			return fmt.Errorf("%w: the pool's entry %q is the shared credential; set it with `credential set anthropic`", errUsage, pool.Default)
		}
		entry = "" // the shared credential, removed as such
	}
	switch {
	case sub == "list":
		return runCredentialList(ctx, c, cmd)
	case entry != "":
		who := "anthropic pool entry " + entry
		return c.credentialOn(ctx, cmd, sub == "add", id, *kind, *yes, who, who, func(be *backend, value []byte) (string, error) {
			v, err := be.SetPoolEntry(ctx, entry, *kind, *weight, *baseURL, value)
			return fmt.Sprintf(", weight %d", v.Weight), err
		}, func(be *backend) error { return be.RemovePoolEntry(ctx, entry) })
	}
	return c.credentialOn(ctx, cmd, sub == "set", id, *kind, *yes, id, id+" credential", func(be *backend, value []byte) (string, error) {
		_, err := be.SetCredential(ctx, id, *kind, value)
		return "", err
	}, func(be *backend) error { return be.RemoveCredential(ctx, id) })
}

// credentialOn is `credential set|add|remove` of who (the credential id,
// or a pool entry of it), named as noun, over the command's backend. For
// set, the value, of kind, is read from stdin before the store is opened
// (so that a prompt does not hold it) and given to put as read, for the
// operator service to check; put returns what more the line saying it
// was set tells. Else (a removal) it asks first unless yes, and calls
// remove.
func (c *cli) credentialOn(ctx context.Context, cmd *cmdFlags, set bool, id, kind string, yes bool, who, noun string, put func(*backend, []byte) (string, error), remove func(*backend) error) error {
	var value []byte
	var err error
	if set {
		value, err = c.readRawCredential(kind, who+" credential (not echoed): ")
	} else {
		err = c.sure(yes, "Remove the "+noun+"?", "removed", "remove")
	}
	if err != nil {
		return err
	}
	defer clear(value)
	return cmd.on(ctx, c, set, set, func(be *backend) error {
		if !set {
			return c.did(remove(be), "removed %s", noun)
		}
		what := describe(id, kind, value)
		more, err := put(be, append([]byte(nil), value...))
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "set %s (%s%s), sealed at rest\n", noun, what, more)
		if what == unlikelyAnthropic {
			c.warnUnlikelyAnthropic(who)
		}
		return nil
	})
}

// runCredentialList prints the credentials by ID with their kind, then
// the pool's entries. Through the admin API the entries carry the
// answering replica's state and counts; from the store alone those are
// not known.
func runCredentialList(ctx context.Context, c *cli, cmd *cmdFlags) error {
	be, err := c.listingBackend(ctx, &cmd.cfg, *cmd.adminURL, "credential list")
	if err != nil {
		return err
	}
	defer be.close()
	creds, err := be.ListCredentials(ctx)
	if err != nil {
		return remoteError(err)
	}
	err = rows(c.stdout, "CREDENTIAL\tKIND\tUPDATED", creds, func(cr operator.CredentialView) []any {
		return []any{safe(cr.ID), kindOrNot(cr.Kind), rfc3339(&cr.UpdatedAt)}
	})
	if err != nil {
		return err
	}
	entries, err := be.PoolEntries(ctx)
	if err != nil {
		return remoteError(err)
	}
	if len(entries) == 0 {
		return nil
	}
	return c.printPool(entries, be.svc == nil)
}

// printPool prints the pool's entries; live says whether state and counts
// are a running broker's.
func (c *cli) printPool(entries []operator.PoolEntryView, live bool) error {
	fmt.Fprintln(c.stdout)
	err := rows(c.stdout, "POOL ENTRY\tKIND\tWEIGHT\tURL\tSTATE\t429s\t529s\tUPDATED", entries, func(e operator.PoolEntryView) []any {
		u := e.URL
		switch {
		case u != "":
		case e.Kind == cloud.Name(cloud.KindBedrock) || e.Kind == cloud.Name(cloud.KindVertex):
			u = "(the account's)" // its endpoint is in its JSON, never --anthropic-url
		default:
			u = "(--anthropic-url)"
		}
		kind := kindOrNot(e.Kind)
		state, n429, n529 := "-", "-", "-"
		if live {
			state, n429, n529 = e.State, fmt.Sprint(e.R429), fmt.Sprint(e.R529)
			if e.Until != nil {
				state += " until " + *e.Until
			}
		}
		return []any{safe(e.Name), kind, e.Weight, safe(u), state, n429, n529, rfc3339(&e.UpdatedAt)}
	})
	if err != nil {
		return err
	}
	if !live {
		fmt.Fprintln(c.stdout, "(state and 429/529 counts are each running broker's own: pass --admin-url to see one's)")
	}
	return nil
}

// kindOrNot is a credential's kind as a list prints it: "(does not
// open)" for "", a value the master key does not open.
func kindOrNot(kind string) string {
	if kind == "" {
		return "(does not open)"
	}
	return kind
}

// describe says what a credential value of kind stored as id is,
// without any of it: a cloud account of a cloud kind by its region,
// read from the account's JSON, which the broker checked; the Fountain
// key as a bearer; every other credential as an Anthropic one.
func describe(id, kind string, value []byte) string {
	switch {
	case operator.IsCloud(kind):
		var a struct {
			Region string `json:"region"`
		}
		what := cloud.Name(kind) + " account"
		if json.Unmarshal(value, &a) == nil && a.Region != "" {
			what += " in " + safe(a.Region)
		}
		return what + ", signed for each call"
	case id == payer.SharedFountain:
		return "bearer key"
	}
	if cloud.Is(value) {
		if cr, err := cloud.Parse(value); err == nil {
			return cloud.Name(cr.Kind) + " account in " + cr.Region + ", signed for each call"
		}
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
