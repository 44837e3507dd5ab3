package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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

// backend is where a command's actions go; close ends it.
type backend struct {
	operator.Actions
	// svc is the operator service when the command opened the store
	// (nil through the admin API), for the actions only a data
	// directory has (admin tokens).
	svc   *operator.Service
	close func()
}

// backend opens the command's backend: the admin API at adminURL when it
// is set, else the store cfg names (created, for create, when it is
// not there), with its keyring when seal is set: a master key that does
// not open what the store holds sealed already is refused before
// anything is written (server.SealingKeyring), as a replica refuses it
// at its start. Its audit rows name the command as "CLI" and route.
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
	st, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var keyring *secrets.Keyring
	if seal {
		if keyring, err = server.SealingKeyring(ctx, cfg, st); err != nil {
			st.Close()
			return nil, err
		}
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
	return &backend{Actions: svc, svc: svc, close: func() { st.Close() }}, nil
}

// boxArg checks that name is a box name, as a usage error.
func boxArg(name string) error {
	if !protocol.IsBoxName(name) {
		return fmt.Errorf("%w: box name %s must match ^[a-z][a-z0-9-]{0,62}$", errUsage, named(name))
	}
	return nil
}

// cmdFlags is one command's flag set: the flags every subcommand shares,
// bound into cfg, and --admin-url. Its name is the command's words
// (box pause), which its audit rows name as the route.
type cmdFlags struct {
	*flag.FlagSet
	cfg      server.Config
	adminURL *string
	words    string
}

// command returns the flag set of the command words names.
func (c *cli) command(words string) *cmdFlags {
	f := &cmdFlags{words: words}
	f.FlagSet = c.flags(words, &f.cfg)
	f.adminURL = c.adminURLFlag(f.FlagSet)
	return f
}

// args parses args (flags anywhere among them) and returns the
// positional ones, which must be n of them: else a usage error saying
// format. A negative n takes any number.
func (f *cmdFlags) args(args []string, n int, format string, a ...any) ([]string, error) {
	pos, err := parseInterspersed(f.FlagSet, args)
	if err != nil {
		return nil, err
	}
	if n >= 0 && len(pos) != n {
		return nil, fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
	}
	return pos, nil
}

// arity is how many positional arguments a word of a command of several
// takes, and what its usage error says when it is given another number.
type arity struct {
	n     int
	usage string
}

// parseSub parses args for sub, a word of a command of several, flags
// anywhere among them, and returns the positional ones: as many as
// want[sub] says. A word not in want is unknown, the error, before any
// flag is read: `-h` after a mistyped word says it is unknown rather than
// print a usage of a command there is not. An empty sub (flags alone)
// has its flags read first, so that -h prints them.
func parseSub(fs *flag.FlagSet, args []string, sub string, want map[string]arity, unknown error) ([]string, error) {
	w, ok := want[sub]
	if !ok && sub != "" {
		return nil, unknown
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, unknown
	}
	if len(pos) != w.n {
		return nil, fmt.Errorf("%w: %s", errUsage, w.usage)
	}
	return pos, nil
}

// boxArgs is args whose first positional argument is a box name.
func (f *cmdFlags) boxArgs(args []string, n int, format string, a ...any) ([]string, error) {
	pos, err := f.args(args, n, format, a...)
	if err != nil {
		return nil, err
	}
	return pos, boxArg(pos[0])
}

// open opens the command's backend (see cli.backend).
func (f *cmdFlags) open(ctx context.Context, c *cli, create, seal bool) (*backend, error) {
	return c.backend(ctx, &f.cfg, *f.adminURL, f.words, create, seal)
}

// on runs do on the command's backend (see cli.backend), closing it
// after; an admin API refusal do returns is said as the CLI says its
// own errors (remoteError).
func (f *cmdFlags) on(ctx context.Context, c *cli, create, seal bool, do func(be *backend) error) error {
	be, err := f.open(ctx, c, create, seal)
	if err != nil {
		return err
	}
	defer be.close()
	return remoteError(do(be))
}

// did says, on stdout, what an action that returned err did: format, or
// err when it failed (an admin API refusal as remoteError says it).
func (c *cli) did(err error, format string, a ...any) error {
	if err != nil {
		return remoteError(err)
	}
	fmt.Fprintf(c.stdout, format+"\n", a...)
	return nil
}

// yesFlag adds --yes, to verb without asking, to fs when on; off, it
// is false.
func yesFlag(fs *flag.FlagSet, on bool, verb string) *bool {
	if !on {
		return new(bool)
	}
	return fs.Bool("yes", false, verb+" without asking")
}

// sure asks question, unless yes: a no is an error saying the action
// (verb, done its past) was not done, and how to do it without asking.
func (c *cli) sure(yes bool, question, done, verb string) error {
	if yes || c.confirm(question) {
		return nil
	}
	return fmt.Errorf("not %s (pass --yes to %s without asking)", done, verb)
}

// rows writes items as a table under header (see table), one line for
// each, its columns what row gives, tab-separated, each as %v writes it.
func rows[T any](w io.Writer, header string, items []T, row func(T) []any) error {
	tw := table(w, header)
	for _, it := range items {
		for i, v := range row(it) {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, v)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
