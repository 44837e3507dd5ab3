package main

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// runAdmin manages the admin API's tokens, directly in the store: the
// first token has to be made where the store is.
func runAdmin(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	var cfg server.Config
	fs := c.flags("admin "+sub, &cfg)
	name, yes, viewer := new(string), yesFlag(fs, sub == "revoke", "revoke"), new(bool)
	if sub == "token" {
		name = fs.String("name", "", "a note saying whose or what the token is for")
		viewer = fs.Bool("viewer", false, "a viewer's token: it reads (the admin API's GET routes, the owner's page) and changes nothing")
	}
	none := arity{0, "admin " + sub + " takes no arguments"}
	args, err := parseSub(fs, args, sub, map[string]arity{"token": none, "tokens": none, "revoke": {1, "admin revoke takes one token ID (see admin tokens)"}},
		unknownWord("admin", sub, "token", "tokens", "revoke"))
	if err != nil {
		return err
	}
	// Admin tokens are made and kept where the store is: there is no
	// admin API route for them. The first token is made where the store
	// is, so token creates it.
	be, err := c.backend(ctx, &cfg, "", "admin "+sub, sub == "token", false)
	if err != nil {
		return err
	}
	defer be.close()
	op := be.svc
	switch sub {
	case "token":
		role := store.AdminOperator
		if *viewer {
			role = store.AdminViewer
		}
		token, t, err := op.MintAdminToken(ctx, *name, role)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "admin token %s made. It is shown this once and only its hash is kept; set it as BOXBROKER_ADMIN_TOKEN where you run the CLI with --admin-url, or sign in to the owner's page with it.\n", t.ID)
		if *viewer {
			fmt.Fprintln(c.stderr, "It is a viewer's: it reads through the admin API and the owner's page, and changes nothing.")
		}
		fmt.Fprintln(c.stdout, token)
	case "tokens":
		list, err := op.AdminTokens(ctx)
		if err != nil {
			return err
		}
		return rows(c.stdout, "ID\tCREATED\tNAME\tROLE", list, func(t operator.AdminTokenView) []any {
			return []any{t.ID, rfc3339(&t.CreatedAt), safe(t.Name), t.Role}
		})
	case "revoke":
		id := args[0]
		if err := c.sure(*yes, fmt.Sprintf("Revoke admin token %s? Whoever holds it can no longer use the admin API or the owner's page.", safe(id)), "revoked", "revoke"); err != nil {
			return err
		}
		err := op.RevokeAdminToken(ctx, id)
		if operator.CodeOf(err) == operator.NotFound {
			return fmt.Errorf("no admin token %s (see admin tokens)", safe(id))
		}
		return c.did(err, "revoked admin token %s", id)
	}
	return nil
}
