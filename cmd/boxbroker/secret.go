package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/quiet"
)

func runSecret(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	cmd := c.command("secret " + sub)
	fs := cmd.FlagSet
	host, brokerURL, word, kind := new(string), new(string), new(string), new(string)
	yes := yesFlag(fs, sub == "remove", "remove")
	var fields, allows bodyFields
	rate := new(string)
	if sub == "set" || sub == "rules" {
		fs.Var(&allows, "allow", "a rule of what the secret may be spent on, 'METHOD PATTERN': a method (or * for any) and a path under the secret's base URL, * standing for one segment and ** for the rest, as in 'GET /repos/acme/**' or 'POST /repos/acme/*/issues'; repeat for more. The rules given replace the secret's; with none, every method and path is allowed")
		rate = fs.String("rate", "", "each box's rate for the secret, `N/PERIOD` with PERIOD s, m or h, as in 120/m; a request past it is refused 429 (kept in each replica's memory)")
	}
	switch sub {
	case "set":
		host = fs.String("host", "", "the one base `URL` the secret may be sent to, https://host[:port][/path]")
		brokerURL = fs.String("url", c.hintURL(), "the broker's URL as boxes reach it, for the hints printed (BOXBROKER_URL, else http:// and BOXBROKER_LISTEN's address)")
		word = fs.String("broker", c.envOr("BOXBROKER_BROKER", "lobby"), "the broker word, for the declaration hint printed (BOXBROKER_BROKER)")
		kind = fs.String("kind", "", "what the broker sends: plain, the value itself (the default), or what it mints or signs with from a JSON configuration on stdin: "+strings.Join(mint.Kinds(), ", "))
		fs.Var(&fields, "body-field", "a top-level `FIELD` of a form or JSON request body in which the broker writes the value, where the field's whole value is the box's token (an API that takes its key in the body, such as client_secret); repeat for more. Anywhere else in a body the token is marked, never swapped")
	}
	pos, err := parseSub(fs, args, sub, map[string]arity{
		"set": {2, "secret set takes BOX NAME; the value is read from stdin, never from arguments"}, "remove": {2, "secret remove takes BOX NAME"}, "list": {1, "secret list takes BOX"},
		"rules": {2, "secret rules takes BOX NAME, then --allow 'METHOD PATTERN' (repeatable) and --rate N/PERIOD; with neither, it clears the secret's rules"},
	}, unknownWord("secret", sub, "set", "rules", "list", "remove"))
	if err != nil {
		return err
	}
	box := pos[0]
	if err := boxArg(box); err != nil {
		return err
	}
	var name string
	if len(pos) == 2 {
		name = pos[1]
		if !protocol.IsSecretName(name) {
			return fmt.Errorf("%w: secret name %s must match ^[A-Z][A-Z0-9_]{0,39}$: an upper-case letter, then up to 39 upper-case letters, digits or _", errUsage, named(name))
		}
	}
	if err := protocol.CheckBodyFields(fields); err != nil {
		return fmt.Errorf("%w: --body-field: %v", errUsage, err)
	}
	rules, rt, err := protocol.CheckSecretRules(allows, *rate)
	if err != nil {
		return fmt.Errorf("%w: --allow or --rate: %v", errUsage, err)
	}
	if sub == "set" {
		if err := checkHintURL(*brokerURL); err != nil {
			return err
		}
	}
	return cmd.on(ctx, c, false, sub == "set", func(be *backend) error {
		switch sub {
		case "set":
			sv := operator.SecretValue{Host: *host, Kind: *kind, BodyFields: fields, Rules: rules, Rate: rt}
			return secretSet(ctx, c, be, *cmd.adminURL != "", box, name, sv, *brokerURL, *word)
		case "rules":
			sv, err := be.SetSecretRules(ctx, box, name, rules, rt)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "set the rules of secret %s of box %s; its value, host and kind are kept\n", name, box)
			if len(sv.Rules) == 0 && sv.Rate == "" {
				fmt.Fprintf(c.stdout, "\n%s allows any method and path, with no rate: its rules are cleared\n", name)
			}
			printRules(c, name, sv.Rules, sv.Rate)
			return nil
		case "remove":
			if err := c.sure(*yes, fmt.Sprintf("Remove the secret %s of box %s?", name, box), "removed", "remove"); err != nil {
				return err
			}
			return c.did(be.RemoveSecret(ctx, box, name), "removed secret %s of box %s", name, box)
		}
		list, err := be.ListSecrets(ctx, box)
		if err != nil {
			return err
		}
		return rows(c.stdout, "SECRET\tKIND\tHOST\tSTATE\tUPDATED\tBODY FIELDS\tALLOWS\tRATE", list, func(s operator.SecretView) []any {
			kind, state := "plain", "-"
			if s.Kind != "" {
				kind, state = s.Kind, s.State
			}
			return []any{safe(s.Name), safe(kind), safe(s.Host), safe(state), safe(s.UpdatedAt), safe(orNone(strings.Join(s.BodyFields, ","))), safe(rulesOrAny(s.Rules)), safe(orNone(s.Rate))}
		})
	})
}

// readConfig reads a minted or signing secret's JSON configuration from
// stdin, never from a terminal or argv.
func (c *cli) readConfig(kind string) ([]byte, error) {
	if f, ok := c.stdin.(*os.File); ok && isTerminal(f) {
		return nil, fmt.Errorf("--kind %s reads its JSON configuration from stdin: pipe it in, as in `boxbroker secret set BOX NAME --host URL --kind %s < config.json`", kind, kind)
	}
	return readAtMost(c.stdin, 64<<10, "read stdin", "the configuration on stdin is over 64 KiB")
}

// bodyFields is the repeatable --body-field flag.
type bodyFields []string

func (f *bodyFields) String() string { return strings.Join(*f, ",") }

func (f *bodyFields) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// rulesOrAny is a secret's rules as `secret list` shows them.
func rulesOrAny(rules []string) string {
	if len(rules) == 0 {
		return "*"
	}
	return strings.Join(rules, "; ")
}

// orNone is s, or "-" for "".
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// secretSet reads the value of box's secret name (a kind's JSON
// configuration from stdin, a plain value from stdin or the terminal)
// and sets it, as sv says the rest, through be; brokerURL and word are
// for the hints printed. Through the admin API (remote) it sets plain
// values only.
func secretSet(ctx context.Context, c *cli, be *backend, remote bool, box, name string, sv operator.SecretValue, brokerURL, word string) error {
	if sv.Host == "" {
		return fmt.Errorf("%w: secret set needs --host, the one base URL the secret may be sent to, as in --host https://api.example.com", errUsage)
	}
	base, err := protocol.ParseSecretHost(sv.Host)
	if err != nil {
		return fmt.Errorf("%w: --host: %v", errUsage, err)
	}
	if sv.Kind == "plain" {
		sv.Kind = ""
	}
	kind := sv.Kind
	if remote && kind != "" {
		return fmt.Errorf("%w: --kind %s with --admin-url: the admin API sets plain values only; run `boxbroker secret set --kind` where the broker's store is", errUsage, kind)
	}
	if (kind == mint.KindSigV4 || kind == mint.KindHMAC) && len(sv.BodyFields) > 0 {
		return fmt.Errorf("%w: --body-field: a %s secret signs requests and writes no value, so it takes no body field", errUsage, kind)
	}
	var value []byte
	if kind != "" {
		value, err = c.readConfig(kind)
	} else {
		value, err = c.readSecret(fmt.Sprintf("value of %s for box %s (not echoed): ", name, box))
	}
	if err != nil {
		return err
	}
	defer clear(value)
	sv.Value = string(value)
	v, err := be.SetSecret(ctx, box, name, sv)
	if err != nil {
		return err
	}
	if quiet.InClear(base) {
		fmt.Fprintf(c.stderr, "warning: %s is http://, so the value travels to it unencrypted\n", base)
	}
	printSecretSet(c, box, name, v.Host, brokerURL, word, kind, v.BodyFields)
	printRules(c, name, v.Rules, v.Rate)
	return nil
}

// printSecretSet says what `secret set` saved and what to give the box.
func printSecretSet(c *cli, box, name, base, brokerURL, word, kind string, fields []string) {
	b := strings.TrimSuffix(brokerURL, "/")
	if kind != "" {
		fmt.Fprintf(c.stdout, "set secret %s of box %s, kind %s, sealed at rest; the broker sends what it mints or signs only to %s\n\n", name, box, kind, base)
	} else {
		fmt.Fprintf(c.stdout, "set secret %s of box %s, sealed at rest; the broker sends it only to %s\n\n", name, box, base)
	}
	fmt.Fprintf(c.stdout, "Give the box:\n  %s_KEY=<the box's token>\n  %s_BASE_URL=%s%s/%s\n\n", name, name, b, protocol.PrefixEgress, name)
	fmt.Fprintf(c.stdout, "and let its box block declare it:\n  { \"name\": %q, \"broker\": %q, \"scope\": [%q] }\n", protocol.Egress, word, name)
	if len(fields) > 0 {
		fmt.Fprintf(c.stdout, "\nIn a request body the broker writes the value only as the whole value of the top-level form or JSON field %s; anywhere else in a body the box's token is marked.\n", strings.Join(fields, ", "))
	}
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments (`secret set BOX NAME --host URL`), and returns
// the positional ones. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// printRules says what the secret set may be spent on.
func printRules(c *cli, name string, rules []string, rate string) {
	if len(rules) == 0 && rate == "" {
		return
	}
	fmt.Fprintf(c.stdout, "\n%s allows ", name)
	if len(rules) == 0 {
		fmt.Fprint(c.stdout, "any method and path")
	} else {
		fmt.Fprintf(c.stdout, "only %s", strings.Join(rules, " and "))
	}
	if rate != "" {
		fmt.Fprintf(c.stdout, ", at most %s for each box", rate)
	}
	fmt.Fprintln(c.stdout)
}
