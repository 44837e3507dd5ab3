package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// setCredential reads a credential from stdin (never argv), seals it under
// the master key for the row id and stores it. It returns what kind of
// credential it was (describe's words), never any of its value.
func (c *cli) setCredential(ctx context.Context, cfg *server.Config, id, prompt string) (string, error) {
	value, err := c.readSecret(prompt)
	if err != nil {
		return "", err
	}
	defer clear(value)
	keyring, err := server.LoadKeyring(cfg)
	if err != nil {
		return "", err
	}
	sealed, err := keyring.Seal(value, payer.AD(id))
	if err != nil {
		return "", err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer st.Close()
	if err := st.SetCredential(ctx, store.Credential{ID: id, Sealed: sealed, UpdatedAt: time.Now().UTC()}); err != nil {
		return "", err
	}
	return describe(id, value), nil
}

// removeCredential deletes the credential id, answering notSet when there
// is none.
func (c *cli) removeCredential(ctx context.Context, cfg *server.Config, id, notSet string) error {
	st, err := openExisting(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.DeleteCredential(ctx, id); errors.Is(err, store.ErrNotFound) {
		return errors.New(notSet)
	} else if err != nil {
		return fmt.Errorf("remove credential: %w", err)
	}
	return nil
}
