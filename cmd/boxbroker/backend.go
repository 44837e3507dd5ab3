package main

import (
	"context"
	"fmt"

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
	svc, err := operator.New(operator.Config{Store: st, Keyring: keyring, DeadLetters: operator.DeadDir{Dir: cfg.DataDir, Store: st}})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &backend{Actions: svc.Via(operator.Origin{Method: "CLI", Route: route}), local: st, close: func() { st.Close() }}, nil
}

// boxArg checks that name is a box name, as a usage error.
func boxArg(name string) error {
	if !protocol.IsBoxName(name) {
		return fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, name)
	}
	return nil
}
