package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
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
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[1] != protocol.PayerShared && pos[1] != protocol.PayerOwner) {
		return fmt.Errorf("%w: box payer NAME shared|owner [--principal github:<login>]; the owner's credential is read from stdin, never from arguments", errUsage)
	}
	name, kind := pos[0], pos[1]
	if !protocol.IsBoxName(name) {
		return fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, name)
	}
	if kind == protocol.PayerShared && *principal != "" {
		return fmt.Errorf("%w: --principal names the owner; a shared payer has none", errUsage)
	}
	if *principal != "" && !protocol.IsPrincipal(*principal) {
		return fmt.Errorf("%w: --principal %q is not a principal (1 to 200 characters, no white space, such as github:<login>)", errUsage, *principal)
	}
	st, err := openStore(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := st.Box(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no box named %s", name)
	}
	if err != nil {
		return err
	}
	id := payer.OwnerAnthropic(name)
	if kind == protocol.PayerOwner {
		// The credential first, so the box is never owner-paid with none.
		value, err := c.readSecret(fmt.Sprintf("%s's owner's Anthropic key or setup token (not echoed): ", name))
		if err != nil {
			return err
		}
		keyring, err := server.LoadKeyring(&cfg)
		if err != nil {
			clear(value)
			return err
		}
		sealed, err := keyring.Seal(value, payer.AD(id))
		what := describe(payer.SharedAnthropic, value)
		clear(value)
		if err != nil {
			return err
		}
		if err := st.SetCredential(ctx, store.Credential{ID: id, Sealed: sealed, UpdatedAt: time.Now().UTC()}); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "set %s's owner's credential (%s), sealed at rest\n", name, what)
	}
	b.PayerKind, b.PayerPrincipal = kind, *principal
	if err := st.UpdateBox(ctx, b); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no box named %s", name)
	} else if err != nil {
		return err
	}
	if kind == protocol.PayerShared {
		if err := st.DeleteCredential(ctx, id); err == nil {
			fmt.Fprintf(c.stderr, "removed %s's owner's credential\n", name)
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the box is now shared-paid, but its owner's credential could not be removed: %w", err)
		}
	}
	pay := protocol.Payer{Kind: kind}
	if *principal != "" {
		pay.Principal = principal
	}
	fmt.Fprintf(c.stdout, "box %s is paid by: %s\n", name, protocol.FormatPayerHeader(pay))
	return nil
}
