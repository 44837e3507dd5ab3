package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

func runBox(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: box add|list|remove|rotate|payer|consent|assign|unassign|resources|pause|resume NAME", errUsage)
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "payer":
		return runBoxPayer(ctx, c, args)
	case "consent":
		return runBoxConsent(ctx, c, args)
	case "assign", "unassign", "resources":
		return runBoxResources(ctx, c, sub, args)
	case "pause", "resume":
		return runBoxPause(ctx, c, sub, args)
	}
	switch sub {
	case "add", "rotate", "remove", "list":
	default:
		return fmt.Errorf("%w: unknown box command %q%s (add, list, remove, rotate, payer, consent, assign, unassign, resources, pause, resume)", errUsage, safe(sub),
			didYouMean(sub, []string{"add", "list", "remove", "rotate", "payer", "consent", "assign", "unassign", "resources", "pause", "resume"}))
	}
	var cfg server.Config
	fs := c.flags("box "+sub, &cfg)
	brokerURL, yes := new(string), new(bool)
	switch sub {
	case "add", "rotate":
		brokerURL = fs.String("url", c.envOr("BOXBROKER_URL", "http://127.0.0.1:8787"), "the broker's URL as boxes reach it, for the hints printed (BOXBROKER_URL)")
	case "remove":
		yes = fs.Bool("yes", false, "remove without asking")
	}
	adminURL := c.adminURLFlag(fs)
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	needName := func() (string, error) {
		if len(args) != 1 {
			return "", fmt.Errorf("%w: box %s takes one NAME", errUsage, sub)
		}
		if !protocol.IsBoxName(args[0]) {
			return "", fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, args[0])
		}
		return args[0], nil
	}
	var name string
	if sub != "list" {
		if name, err = needName(); err != nil {
			return err
		}
	} else if len(args) != 0 {
		return fmt.Errorf("%w: box list takes no arguments", errUsage)
	}
	if sub == "add" || sub == "rotate" {
		if err := checkHintURL(*brokerURL); err != nil {
			return err
		}
	}
	if *adminURL != "" {
		return runBoxRemote(ctx, c, *adminURL, sub, name, *brokerURL, *yes)
	}
	open := openExisting
	if sub == "add" {
		open = openStore
	}
	st, err := open(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "add":
		tok, err := token.NewBox()
		if err != nil {
			return err
		}
		err = st.CreateBox(ctx, store.Box{Name: name, TokenHash: token.Hash(tok), CreatedAt: time.Now().UTC(), PayerKind: protocol.PayerShared})
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("a box named %s already exists (rotate its token with `boxbroker box rotate %s`)", name, name)
		}
		if err != nil {
			return err
		}
		printToken(c, name, tok, *brokerURL, "added")
	case "rotate":
		tok, err := token.NewBox()
		if err != nil {
			return err
		}
		if err := st.RotateToken(ctx, name, token.Hash(tok)); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no box named %s", name)
		} else if err != nil {
			return err
		}
		printToken(c, name, tok, *brokerURL, "rotated; the old token no longer works")
	case "remove":
		if !*yes && !c.confirm(fmt.Sprintf("Remove box %s, its declaration, secrets, grants and feedback?", name)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		if err := st.DeleteBox(ctx, name); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no box named %s", name)
		} else if err != nil {
			return err
		}
		// The owner's credential is the box's alone; it goes with the box.
		if err := st.DeleteCredential(ctx, payer.OwnerAnthropic(name)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("removed box %s, but not its owner's credential: %w", name, err)
		}
		fmt.Fprintf(c.stdout, "removed box %s\n", name)
	case "list":
		return listBoxes(ctx, c.stdout, st)
	}
	return nil
}

func printToken(c *cli, name, token, brokerURL, what string) {
	base := strings.TrimSuffix(brokerURL, "/")
	fmt.Fprintf(c.stderr, "box %s %s. Its token is shown this once; give it to the box and nowhere else.\n", name, what)
	fmt.Fprintln(c.stdout, token)
	fmt.Fprintf(c.stderr, "\nThe box's environment:\n  STUDIO_URL=%s\n  ANTHROPIC_BASE_URL=%s/llm/anthropic\n  ANTHROPIC_API_KEY=<the token above>\n", base, base)
}

// confirm asks on stderr and reads y/yes from stdin. Where stdin is no
// terminal, nothing echoes the answer's line break, so confirm ends the
// question's line itself.
func (c *cli) confirm(question string) bool {
	fmt.Fprintf(c.stderr, "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(c.stdin, &answer)
	if f, ok := c.stdin.(*os.File); !ok || !isTerminal(f) {
		fmt.Fprintln(c.stderr)
	}
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}

// checkHintURL refuses a --url (BOXBROKER_URL) that is no http(s) URL with
// a host, such as localhost:8787: the hints printed from it are what the
// operator gives a box, and they would not reach the broker.
func checkHintURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --url (BOXBROKER_URL) %q is not an http(s) URL with a host, such as http://127.0.0.1:8787: it is the broker's URL as boxes reach it, for the hints printed", errUsage, safe(s))
	}
	return nil
}
