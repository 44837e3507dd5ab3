package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// A command's backend, picked once: the operator service over the data
// directory's store, or the admin API at --admin-url. Each command is
// written once over it.

// backend is where a command's actions go. Local is the store when the
// command opened one (nil through the admin API); close ends it.
type backend struct {
	operator.Actions
	local store.Store
	// svc is the operator service when the command opened the store
	// (nil through the admin API), for the actions only a data
	// directory has (admin tokens).
	svc   *operator.Service
	close func()
}

// backend opens the command's backend: the admin API at adminURL when it
// is set, else the store cfg names (created, for create, when it is
// not there), with its keyring when seal is set. Its audit rows name the
// command as "CLI" and route.
func (c *cli) backend(ctx context.Context, cfg *server.Config, adminURL, route string, create, seal bool) (*backend, error) {
	if adminURL != "" {
		cl, err := c.adminClient(adminURL)
		if err != nil {
			return nil, err
		}
		return &backend{Actions: cl, close: func() {}}, nil
	}
	open := openExisting
	if create {
		open = openStore
	}
	var (
		st      store.Store
		keyring *secrets.Keyring
		err     error
	)
	if seal {
		st, keyring, err = sealing(ctx, cfg, open)
	} else {
		st, err = open(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	return c.localBackend(cfg, st, keyring, route)
}

// listingBackend is backend for a command that reads what is sealed to
// say its kind (credential list): the store must exist, and the master
// key is loaded, not held to what the store holds sealed, so that a
// value it does not open is listed as such, as the admin API lists it.
func (c *cli) listingBackend(ctx context.Context, cfg *server.Config, adminURL, route string) (*backend, error) {
	if adminURL != "" {
		return c.backend(ctx, cfg, adminURL, route, false, false)
	}
	st, err := openExisting(ctx, cfg)
	if err != nil {
		return nil, err
	}
	keyring, err := server.LoadKeyring(cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	return c.localBackend(cfg, st, keyring, route)
}

// localBackend is the operator service over st, with keyring (nil for
// none) and the dead letters of cfg's data directory, whose audit rows
// name the command as "CLI" and route; closing it closes st.
func (c *cli) localBackend(cfg *server.Config, st store.Store, keyring *secrets.Keyring, route string) (*backend, error) {
	// The command says what it did on stdout, and the audit row keeps
	// it: the service's own INFO line would say it twice. Its warnings
	// go to stderr.
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := operator.New(operator.Config{Store: st, Keyring: keyring, Logger: log, DeadLetters: operator.DeadDir{Dir: cfg.DataDir, Store: st}})
	if err != nil {
		st.Close()
		return nil, err
	}
	svc = svc.Via(operator.Origin{Method: "CLI", Route: route})
	return &backend{Actions: svc, local: st, svc: svc, close: func() { st.Close() }}, nil
}

// boxArg checks that name is a box name, as a usage error.
func boxArg(name string) error {
	if !protocol.IsBoxName(name) {
		return fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, name)
	}
	return nil
}
