package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// sealing opens the store cfg names with open (openStore or openExisting)
// and the master key, for a command about to seal a value into it: a key
// that does not open what the store holds sealed already is refused
// before anything is written (server.SealingKeyring), as a replica
// refuses it at its start.
func sealing(ctx context.Context, cfg *server.Config, open func(context.Context, *server.Config) (store.Store, error)) (store.Store, *secrets.Keyring, error) {
	st, err := open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	keyring, err := server.SealingKeyring(ctx, cfg, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, keyring, nil
}

// storeSealed reads a value of kind (readCredential) from stdin (never
// argv) with prompt, seals it under the master key for ad, and stores the
// sealed bytes with put. It returns describe's words for the value as the
// credential id, never any of its value.
func (c *cli) storeSealed(ctx context.Context, cfg *server.Config, kind, prompt, ad, id string, put func(store.Store, []byte) error) (string, error) {
	value, err := c.readCredential(kind, prompt)
	if err != nil {
		return "", err
	}
	defer clear(value)
	st, keyring, err := sealing(ctx, cfg, openStore)
	if err != nil {
		return "", err
	}
	defer st.Close()
	sealed, err := keyring.Seal(value, ad)
	if err != nil {
		return "", err
	}
	if err := put(st, sealed); err != nil {
		return "", err
	}
	return describe(id, value), nil
}

// readCredential reads an Anthropic credential of kind from stdin
// (readRawCredential) and checks it with operator.CheckCredential, the
// check the admin API makes, returning the form to seal. No error holds
// any of it.
func (c *cli) readCredential(kind, prompt string) ([]byte, error) {
	raw, err := c.readRawCredential(kind, prompt)
	if err != nil {
		return nil, err
	}
	v, err := operator.CheckCredential(kind, raw)
	if err != nil {
		clear(raw)
		return nil, err
	}
	if cloud.Is(v) {
		clear(raw) // v is cloud.Check's own copy
	}
	return v, nil
}

// readRawCredential reads an Anthropic credential of kind from stdin,
// unchecked: for anthropic ("" too) the key or setup token itself
// (readSecret); for bedrock or vertex the cloud account's JSON as given.
// No error holds any of it.
func (c *cli) readRawCredential(kind, prompt string) ([]byte, error) {
	switch kind {
	case "", cloud.KindAnthropic:
		return c.readSecret(prompt)
	case cloud.KindBedrock, cloud.KindVertex:
	default:
		return nil, fmt.Errorf("%w: --kind is one of %s", errUsage, strings.Join(cloud.Kinds, ", "))
	}
	if f, ok := c.stdin.(*os.File); ok && isTerminal(f) {
		return nil, fmt.Errorf("a %s credential is a JSON object: pipe it in from a file, as in `boxbroker credential set anthropic --kind %s < %s.json` (docs/cloud.md)", kind, kind, kind)
	}
	b, err := io.ReadAll(io.LimitReader(c.stdin, cloud.MaxValue+1))
	if err != nil {
		clear(b)
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("no value on stdin: pipe the %s credential's JSON in (docs/cloud.md)", kind)
	}
	if len(b) > cloud.MaxValue {
		clear(b)
		return nil, fmt.Errorf("the %s credential on stdin is over %d bytes", kind, cloud.MaxValue)
	}
	return b, nil
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

// addPoolEntry reads an Anthropic credential from stdin, seals it for the
// pool entry name and stores it with its weight and base URL. It returns
// describe's words for it, never any of its value.
func (c *cli) addPoolEntry(ctx context.Context, cfg *server.Config, name, kind string, weight int, baseURL string) (string, error) {
	prompt := fmt.Sprintf("anthropic pool entry %s credential (not echoed): ", name)
	return c.storeSealed(ctx, cfg, kind, prompt, pool.AD(name), payer.SharedAnthropic, func(st store.Store, sealed []byte) error {
		return st.SetPoolEntry(ctx, store.PoolEntry{Name: name, Weight: weight, URL: baseURL, Sealed: sealed, UpdatedAt: time.Now().UTC()})
	})
}

// removePoolEntry deletes the pool entry name.
func (c *cli) removePoolEntry(ctx context.Context, cfg *server.Config, name string) error {
	st, err := openExisting(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.DeletePoolEntry(ctx, name); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("the anthropic pool has no entry named %s", name)
	} else if err != nil {
		return fmt.Errorf("remove pool entry: %w", err)
	}
	return nil
}
