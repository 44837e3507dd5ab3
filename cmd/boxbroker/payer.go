package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// runBoxPayer is `box payer NAME shared` or `box payer NAME owner
// [--principal github:<login>]`, the owner's Anthropic key or setup token
// read from stdin. Switching to shared removes the owner's credential.
func runBoxPayer(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("box payer", &cfg)
	principal := fs.String("principal", "", "who the owner is, as github:<login>; said in the payer (owner only)")
	credKind := fs.String("kind", cloud.KindAnthropic, "the owner's credential's kind: anthropic (a key or setup token), bedrock or vertex (a cloud account's JSON on stdin; docs/cloud.md)")
	adminURL := c.adminURLFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[1] != protocol.PayerShared && pos[1] != protocol.PayerOwner) {
		return fmt.Errorf("%w: box payer NAME shared|owner [--principal github:<login>]; the owner's credential is read from stdin, never from arguments", errUsage)
	}
	name, kind := pos[0], pos[1]
	if err := boxArg(name); err != nil {
		return err
	}
	if kind == protocol.PayerShared && *principal != "" {
		return fmt.Errorf("%w: --principal names the owner; a shared payer has none", errUsage)
	}
	if *principal != "" {
		if err := checkPrincipal(*principal); err != nil {
			return err
		}
	}
	if *credKind != cloud.KindAnthropic && kind != protocol.PayerOwner {
		return fmt.Errorf("%w: --kind is the owner's credential's; a shared payer has none", errUsage)
	}
	if *adminURL != "" {
		return runBoxPayerRemote(ctx, c, *adminURL, name, kind, *principal, *credKind)
	}
	choice := payer.Choice{Kind: kind, Principal: *principal}
	var keyring *secrets.Keyring
	if kind == protocol.PayerOwner {
		// Read before the store is opened, so a prompt does not hold it;
		// but not for a data directory that holds no boxbroker data.
		if err := needData(&cfg); err != nil {
			return err
		}
		value, err := c.readCredential(*credKind, fmt.Sprintf("%s's owner's Anthropic key or setup token (not echoed): ", name))
		if err != nil {
			return err
		}
		defer clear(value)
		choice.Credential = value
	}
	st, err := openExisting(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if kind == protocol.PayerOwner {
		if keyring, err = server.SealingKeyring(ctx, &cfg, st); err != nil {
			return err
		}
	}
	ch, err := payer.Set(ctx, st, keyring, name, choice, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return errors.New(operator.NoBox(name))
	}
	if ch.CredentialSet {
		fmt.Fprintf(c.stderr, "set %s's owner's credential (%s), sealed at rest\n", name, describe(payer.SharedAnthropic, choice.Credential))
	}
	if err != nil {
		return err
	}
	if ch.CredentialRemoved {
		fmt.Fprintf(c.stderr, "removed %s's owner's credential\n", name)
	}
	pay := protocol.Payer{Kind: kind}
	if *principal != "" {
		pay.Principal = principal
	}
	fmt.Fprintf(c.stdout, "box %s is paid by: %s\n", name, protocol.FormatPayerHeader(pay))
	return nil
}
