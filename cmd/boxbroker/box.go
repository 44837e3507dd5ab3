package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

func runBox(ctx context.Context, c *cli, args []string) error {
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
	case "add", "rotate", "remove", "list", "bind":
	default:
		return unknownWord("box", sub, "add", "list", "remove", "rotate", "bind", "payer", "consent", "assign", "unassign", "resources", "pause", "resume")
	}
	cmd := c.command("box " + sub)
	fs := cmd.FlagSet
	brokerURL, yes := new(string), yesFlag(fs, sub == "remove", "remove")
	if sub == "add" || sub == "rotate" {
		brokerURL = fs.String("url", c.hintURL(), "the broker's URL as boxes reach it, for the hints printed (BOXBROKER_URL, else http:// and BOXBROKER_LISTEN's address)")
	}
	var lt lifetimes
	switch sub {
	case "add":
		fs.StringVar(&lt.from, "from", "", "source CIDRs (comma-separated) the box's token is taken from, where the box runs; empty or any: every address")
		fs.StringVar(&lt.ttl, "ttl", "", "lifetime of each of the box's tokens, such as 720h; empty: none")
	case "bind":
		fs.StringVar(&lt.from, "from", "", "source CIDRs (comma-separated) the box's token is taken from, where the box runs; any: every address")
		fs.BoolVar(&lt.clear, "clear", false, "take the box's token from any address (as --from any)")
	case "rotate":
		fs.StringVar(&lt.grace, "grace", "", "how long the old token goes on working beside the new one, such as 1h; empty: it stops at once")
		fs.StringVar(&lt.ttl, "ttl", "", "lifetime of the box's tokens from now on, such as 720h, 0 for none; empty: the one it has")
	}
	args, err := cmd.args(args, -1, "")
	if err != nil {
		return err
	}
	var name string
	if sub != "list" {
		if len(args) != 1 {
			return fmt.Errorf("%w: box %s takes one NAME", errUsage, sub)
		}
		name = args[0]
		if err := boxArg(name); err != nil {
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
	if err := lt.check(sub, fs); err != nil {
		return err
	}
	return cmd.on(ctx, c, sub == "add", false, func(be *backend) error { return runBoxOn(ctx, c, be, sub, name, *brokerURL, *yes, lt) })
}

// runBoxOn is `box add|list|remove|rotate|bind` on be.
func runBoxOn(ctx context.Context, c *cli, be *backend, sub, name, brokerURL string, yes bool, lt lifetimes) error {
	switch sub {
	case "add":
		nb := operator.NewBox{Name: name, From: lt.fromStrings()}
		if lt.ttlD > 0 {
			nb.TTL = lt.ttlD.String()
		}
		bt, err := be.AddBox(ctx, nb)
		if err != nil {
			return err
		}
		printToken(c, name, bt.Token, brokerURL, "added"+lt.added(parseViewTime(bt.Box.ExpiresAt)))
	case "rotate":
		tr := operator.TokenRotation{TTL: lt.ttlString()}
		if lt.graceD > 0 {
			tr.Grace = lt.graceD.String()
		}
		bt, err := be.RotateBoxWith(ctx, name, tr)
		if err != nil {
			return err
		}
		printToken(c, name, bt.Token, brokerURL, "rotated; "+lt.rotated(parseViewTime(bt.Box.OldTokenUntil), parseViewTime(bt.Box.ExpiresAt)))
	case "bind":
		from := lt.fromStrings()
		_, err := be.UpdateBox(ctx, name, operator.BoxSettings{From: &from})
		return c.did(err, "box %s: its token is taken from %s", name, operator.DescribeFrom(lt.fromList))
	case "remove":
		if err := c.sure(yes, fmt.Sprintf("Remove box %s, its declaration, secrets, grants and feedback?", name), "removed", "remove"); err != nil {
			return err
		}
		return c.did(be.RemoveBox(ctx, name), "removed box %s", name)
	case "list":
		return listBoxes(ctx, c.stdout, be)
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
	fmt.Fprintf(c.stderr, "%s [y/N] ", proxy.ScrubKept(question))
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
	if u.Port() == "0" {
		return fmt.Errorf("%w: --url %q (BOXBROKER_URL, else BOXBROKER_LISTEN's address) names port 0, which lets serve pick its port: give the address its `listening on` line printed as --url or BOXBROKER_URL, for the hints printed", errUsage, safe(s))
	}
	return nil
}

// lifetimes are box add's, bind's and rotate's flags for where a box's
// token is taken from and how long it lives, as given and as read.
type lifetimes struct {
	from, ttl, grace string
	clear            bool

	fromList []netip.Prefix
	ttlD     time.Duration
	ttlSet   bool
	graceD   time.Duration
}

// check reads the flags sub was given.
func (lt *lifetimes) check(sub string, fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if sub == "bind" {
		switch {
		case lt.clear && set["from"]:
			return fmt.Errorf("%w: box bind takes --from or --clear, not both", errUsage)
		case !lt.clear && !set["from"]:
			return fmt.Errorf("%w: box bind NAME --from CIDR[,CIDR] (or --from any, or --clear)", errUsage)
		}
	}
	var err error
	if !lt.clear {
		if lt.fromList, err = store.ParseFrom(lt.from); err != nil {
			return fmt.Errorf("%w: --from: %v", errUsage, err)
		}
	}
	if lt.ttlD, err = parseLifetime("ttl", lt.ttl); err != nil {
		return err
	}
	lt.ttlSet = set["ttl"]
	lt.graceD, err = parseLifetime("grace", lt.grace)
	return err
}

func parseLifetime(flagName, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: --%s %q is not a duration such as 1h or 720h", errUsage, flagName, safe(v))
	}
	return d, nil
}

// ttlString is the TTL as the admin API takes it, nil when not given.
func (lt *lifetimes) ttlString() *string {
	if !lt.ttlSet {
		return nil
	}
	v := lt.ttlD.String()
	return &v
}

// fromStrings is --from as the admin API takes it.
func (lt *lifetimes) fromStrings() []string {
	out := []string{}
	for _, p := range lt.fromList {
		out = append(out, p.String())
	}
	return out
}

// added says, after "added", where the new token is taken from and
// until when.
func (lt *lifetimes) added(expires time.Time) string {
	s := ""
	if len(lt.fromList) > 0 {
		s += "; its token is taken only from " + operator.DescribeFrom(lt.fromList)
	}
	if !expires.IsZero() {
		s += "; its token expires at " + expires.UTC().Format(time.RFC3339)
	}
	return s
}

// rotated says what became of the old token, and when the new expires.
func (lt *lifetimes) rotated(graceUntil, expires time.Time) string {
	s := "the old token no longer works"
	if !graceUntil.IsZero() {
		s = "the old token goes on working until " + graceUntil.UTC().Format(time.RFC3339)
	}
	if !expires.IsZero() {
		s += "; the new one expires at " + expires.UTC().Format(time.RFC3339)
	}
	return s
}
