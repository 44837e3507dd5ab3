package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// minSecretLen is the shortest value `secret set` takes: the broker swaps
// the value out of every answer, and a shorter one would match ordinary
// text.
const minSecretLen = 8

func runSecret(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: secret set BOX NAME --host URL [--kind KIND] [--body-field FIELD]... [--allow 'METHOD PATTERN']... [--rate N/PERIOD] | list BOX | remove BOX NAME", errUsage)
	}
	sub, args := args[0], args[1:]
	var cfg server.Config
	fs := c.flags("secret "+sub, &cfg)
	host, brokerURL, word, kind, yes := new(string), new(string), new(string), new(string), new(bool)
	var fields, allows bodyFields
	rate := new(string)
	switch sub {
	case "set":
		host = fs.String("host", "", "the one base `URL` the secret may be sent to, https://host[:port][/path]")
		brokerURL = fs.String("url", c.envOr("BOXBROKER_URL", "http://127.0.0.1:8787"), "the broker's URL as boxes reach it, for the hints printed (BOXBROKER_URL)")
		word = fs.String("broker", c.envOr("BOXBROKER_BROKER", "lobby"), "the broker word, for the declaration hint printed (BOXBROKER_BROKER)")
		kind = fs.String("kind", "", "what the broker sends: plain, the value itself (the default), or what it mints or signs with from a JSON configuration on stdin: "+strings.Join(mint.Kinds(), ", "))
		fs.Var(&allows, "allow", "a rule of what the secret may be spent on, 'METHOD PATTERN': a method (or * for any) and a path under the secret's base URL, * standing for one segment and ** for the rest, as in 'GET /repos/acme/**' or 'POST /repos/acme/*/issues'; repeat for more. The rules given replace the secret's; with none, every method and path is allowed")
		rate = fs.String("rate", "", "each box's rate for the secret, `N/PERIOD` with PERIOD s, m or h, as in 120/m; a request past it is refused 429 (kept in each replica's memory)")
		fs.Var(&fields, "body-field", "a top-level `FIELD` of a form or JSON request body in which the broker writes the value, where the field's whole value is the box's token (an API that takes its key in the body, such as client_secret); repeat for more. Anywhere else in a body the token is marked, never swapped")
	case "remove":
		yes = fs.Bool("yes", false, "remove without asking")
	}
	adminURL := c.adminURLFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	want := map[string]int{"set": 2, "remove": 2, "list": 1}
	n, ok := want[sub]
	if !ok {
		return fmt.Errorf("%w: unknown secret command %q (set, list, remove)", errUsage, sub)
	}
	if len(pos) != n {
		what := "BOX NAME"
		if n == 1 {
			what = "BOX"
		}
		if sub == "set" {
			what += "; the value is read from stdin, never from arguments"
		}
		return fmt.Errorf("%w: secret %s takes %s", errUsage, sub, what)
	}
	box := pos[0]
	if err := boxArg(box); err != nil {
		return err
	}
	var name string
	if n == 2 {
		name = pos[1]
		if !protocol.IsSecretName(name) {
			return fmt.Errorf("%w: secret name %q must match ^[A-Z][A-Z0-9_]{0,39}$: an upper-case letter, then up to 39 upper-case letters, digits or _", errUsage, name)
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
	if *adminURL != "" {
		return runSecretRemote(ctx, c, *adminURL, sub, box, name, secretSetting{host: *host, brokerURL: *brokerURL, word: *word, kind: *kind, fields: fields, rules: rules, rate: rt}, *yes)
	}
	switch sub {
	case "set":
		return secretSet(ctx, c, &cfg, box, name, secretSetting{host: *host, brokerURL: *brokerURL, word: *word, kind: *kind, fields: fields, rules: rules, rate: rt})
	case "remove":
		if !*yes && !c.confirm(fmt.Sprintf("Remove the secret %s of box %s?", name, box)) {
			return errors.New("not removed (pass --yes to remove without asking)")
		}
		st, err := openExisting(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.DeleteSecret(ctx, box, name); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("box %s has no secret %s", box, name)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "removed secret %s of box %s\n", name, box)
	case "list":
		st, err := openExisting(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		if _, err := st.Box(ctx, box); errors.Is(err, store.ErrNotFound) {
			return errors.New(operator.NoBox(box))
		} else if err != nil {
			return err
		}
		secrets, err := st.ListSecrets(ctx, box)
		if err != nil {
			return err
		}
		states, err := st.ListMintStates(ctx, box)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SECRET\tKIND\tHOST\tSTATE\tUPDATED\tBODY FIELDS\tALLOWS\tRATE")
		for _, s := range secrets {
			kind, state := "plain", "-"
			if s.Kind != "" {
				kind = s.Kind
				full, err := st.Secret(ctx, box, s.Name)
				if err != nil {
					return err
				}
				state = mint.State(full, states, time.Now())
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, kind, s.Host, state, s.UpdatedAt.UTC().Format(time.RFC3339), fieldsOrNone(s.BodyFields), rulesOrAny(s.Rules), orNone(s.Rate))
		}
		return tw.Flush()
	}
	return nil
}

// readConfig reads a minted or signing secret's JSON configuration from
// stdin, never from a terminal or argv.
func (c *cli) readConfig(kind string) ([]byte, error) {
	if f, ok := c.stdin.(*os.File); ok && isTerminal(f) {
		return nil, fmt.Errorf("--kind %s reads its JSON configuration from stdin: pipe it in, as in `boxbroker secret set BOX NAME --host URL --kind %s < config.json`", kind, kind)
	}
	b, err := io.ReadAll(io.LimitReader(c.stdin, 64<<10+1))
	if err != nil {
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	if len(b) > 64<<10 {
		return nil, errors.New("the configuration on stdin is over 64 KiB")
	}
	return b, nil
}

// bodyFields is the repeatable --body-field flag.
type bodyFields []string

func (f *bodyFields) String() string { return strings.Join(*f, ",") }

func (f *bodyFields) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// fieldsOrNone is a secret's body fields as `secret list` shows them.
func fieldsOrNone(fields []string) string {
	if len(fields) == 0 {
		return "-"
	}
	return strings.Join(fields, ",")
}

// secretSetting is what `secret set` was told beside the box and name.
type secretSetting struct {
	host, brokerURL, word, kind string
	fields                      []string
	// rules and rate are the secret's (protocol.CheckSecretRules).
	rules []string
	rate  string
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

func secretSet(ctx context.Context, c *cli, cfg *server.Config, box, name string, set secretSetting) error {
	host, brokerURL, word, kind := set.host, set.brokerURL, set.word, set.kind
	if host == "" {
		return fmt.Errorf("%w: secret set needs --host, the one base URL the secret may be sent to, as in --host https://api.example.com", errUsage)
	}
	if err := needData(cfg); err != nil {
		return err
	}
	base, err := protocol.ParseSecretHost(host)
	if err != nil {
		return fmt.Errorf("%w: --host %v", errUsage, err)
	}
	var value []byte
	if kind == "plain" {
		kind = ""
	}
	if kind != "" {
		value, err = c.readConfig(kind)
		if err != nil {
			return err
		}
		defer clear(value)
		spec, err := mint.Parse(kind, value)
		if err != nil {
			return fmt.Errorf("--kind %s: %w", kind, err)
		}
		if _, signs := spec.(mint.Signer); signs && len(set.fields) > 0 {
			return fmt.Errorf("%w: --body-field: a %s secret signs requests and writes no value, so it takes no body field", errUsage, kind)
		}
	} else {
		value, err = c.readSecret(fmt.Sprintf("value of %s for box %s (not echoed): ", name, box))
		if err != nil {
			return err
		}
		defer clear(value)
		if len(value) < minSecretLen {
			return fmt.Errorf("the value is shorter than %d bytes: the broker keeps it out of answers by matching it, and a value that short would match ordinary text", minSecretLen)
		}
		for _, b := range value {
			if b < 0x20 || b == 0x7f {
				return errors.New("the value holds a control character, which cannot travel in a request header")
			}
		}
	}
	st, keyring, err := sealing(ctx, cfg, openExisting)
	if err != nil {
		return err
	}
	defer st.Close()
	sealed, err := keyring.Seal(value, secrets.SecretAD(box, name))
	if err != nil {
		return err
	}
	err = st.SetSecret(ctx, store.Secret{Box: box, Name: name, Host: base.String(), Sealed: sealed, UpdatedAt: time.Now().UTC(), Kind: kind, BodyFields: set.fields, Rules: set.rules, Rate: set.rate})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no box named %s (add it with `boxbroker box add %s`)", box, box)
	}
	if err != nil {
		return err
	}
	if err := st.AddAudit(ctx, []store.AuditEntry{{Box: box, At: time.Now().UTC(), Method: "SET", Route: "boxbroker secret set",
		Capability: store.ActorAdmin, Status: 200, Message: admin.RulesMessage(name, set.rules, set.rate)}}); err != nil {
		return fmt.Errorf("audit secret set: %w", err)
	}
	if base.Scheme == "http" && !isLoopback(base.Hostname()) {
		fmt.Fprintf(c.stderr, "warning: %s is http://, so the value travels to it unencrypted\n", base)
	}
	printSecretSet(c, box, name, base.String(), brokerURL, word, kind, set.fields)
	printRules(c, name, set.rules, set.rate)
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

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
