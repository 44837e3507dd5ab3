// Command boxbroker is a broker of the Broker Protocol, version 1: it holds
// the credentials sandboxed agent boxes may not, swaps each box's own token
// for them, and forwards only what the box's last declaration report
// allows.
//
// Usage:
//
//	boxbroker serve [flags]              run the broker
//	boxbroker version                    the module version and VCS revision
//	boxbroker ready [--url URL]          ask a running serve's /readyz; exit 0 when ready
//	boxbroker box add|list|remove|rotate  manage boxes and their tokens
//	boxbroker credential set|add|list|remove  manage the operator's credentials
//	boxbroker secret set|rules|list|remove  manage a box's egress secrets
//	boxbroker box consent NAME on|off      record the box owner's consent to keep feedback
//	boxbroker box assign|unassign NAME sandbox|vault|conversation ID
//	                                       say which Fountain ids are the box's
//	boxbroker feedback list|export BOX    print the feedback kept for a box
//	boxbroker box payer NAME shared|owner who pays for a box's model calls
//	boxbroker visitor set|list|remove     manage visitors' credentials
//	boxbroker grant issue|list|revoke     grant a visitor's credential to one box
//	boxbroker box pause|resume NAME       refuse a box everything, or serve it again
//	boxbroker budget set|list|remove      manage a box's budgets (month, week, day, rolling)
//	boxbroker limit set|list|remove       manage a box's token-rate limits
//	boxbroker spend BOX                   a box's measured spend beside what it reported
//	boxbroker prices [--json]             the price table and when it was checked
//	boxbroker admin token|tokens|revoke   manage the admin API's tokens
//	boxbroker audit [BOX] --since 1h      list the audit log
//	boxbroker spool dead list|retry ID|drop ID  the batches the store refused for good
//
// Every subcommand but report and ready (which talk to a broker over HTTP),
// prices and version takes --data DIR (or BOXBROKER_DATA) for the data directory and
// --store URL (or BOXBROKER_STORE) for a PostgreSQL store. Flags may come
// before or after a subcommand's words and arguments.
// box (add, list, remove, rotate, payer, pause, resume), credential, secret,
// visitor, grant, budget, spend, audit, spool dead, proxy ca (and rotate)
// and prices take --admin-url (or BOXBROKER_ADMIN_URL) to act through a
// broker's admin API instead, with BOXBROKER_ADMIN_TOKEN.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"unicode"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, env *cli, args []string) error
	// subs are the words a command of several takes first (box add, box
	// list, ...), so that flags may come before them too.
	subs []string
	// usage is what a command of several says, as a usage error, when it
	// is given none of its words.
	usage string
}

// commands is the subcommand table; each lives in its own file.
func commands() map[string]command {
	cmds := map[string]command{
		"serve":      {summary: "run the broker", run: runServe},
		"box":        {summary: "manage boxes: add, list, remove, rotate, payer, consent, assign, unassign, resources, pause, resume", run: runBox, usage: "box add|list|remove|rotate|bind|payer|consent|assign|unassign|resources|pause|resume NAME", subs: []string{"add", "list", "remove", "rotate", "payer", "consent", "assign", "unassign", "resources", "pause", "resume"}},
		"feedback":   {summary: "print kept feedback: list, export", run: runFeedback, usage: "feedback list|export BOX", subs: []string{"list", "export"}},
		"credential": {summary: "manage credentials: set, add, list, remove", run: runCredential, usage: "credential set|add|list|remove anthropic|fountain", subs: []string{"set", "add", "list", "remove"}},
		"secret":     {summary: "manage a box's egress secrets: set, rules, list, remove", run: runSecret, usage: "secret set BOX NAME --host URL [--kind KIND] [--body-field FIELD]... [--allow 'METHOD PATTERN']... [--rate N/PERIOD] | rules BOX NAME [--allow 'METHOD PATTERN']... [--rate N/PERIOD] | list BOX | remove BOX NAME", subs: []string{"set", "rules", "list", "remove"}},
		"report":     {summary: "post a box's declaration report (the steward's side)", run: runReport},
		"visitor":    {summary: "manage visitors' credentials: set, list, remove", run: runVisitor, usage: "visitor set|list|remove PRINCIPAL", subs: []string{"set", "list", "remove"}},
		"grant":      {summary: "manage grants to visitors: issue, list, revoke", run: runGrant, usage: "grant issue BOX PRINCIPAL [--ttl 15m] | revoke ID | list BOX", subs: []string{"issue", "list", "revoke"}},
		"budget":     {summary: "manage a box's budgets by month, week, day or rolling days: set, list, remove", run: runBudget, usage: "budget set BOX AMOUNT [--principal P] | list BOX [--month YYYY-MM] | remove BOX [--principal P]", subs: []string{"set", "list", "remove"}},
		"limit":      {summary: "manage a box's token-rate limits: set, list, remove", run: runLimit, usage: "limit set BOX [--principal P] [--input-tpm N] [--output-tpm N] [--rpm N] | list BOX | remove BOX [--principal P]", subs: []string{"set", "list", "remove"}},
		"spend":      {summary: "show a box's measured spend beside what it reported", run: runSpend},
		"prices":     {summary: "print the price table spend is charged by, and when it was checked", run: runPrices},
		"admin":      {summary: "manage admin API tokens: token, tokens, revoke", run: runAdmin, usage: "admin token|tokens|revoke", subs: []string{"token", "tokens", "revoke"}},
		"audit":      {summary: "list the audit log: audit [BOX] --since 1h", run: runAudit},
		"version":    {summary: "print the module version and VCS revision", run: runVersion},
		"ready":      {summary: "ask a running serve whether it is ready (/readyz); exit 0 when it is", run: runReady},
		"proxy":      {summary: "the egress proxy: ca prints its CA certificate, ca rotate replaces it", run: runProxy, usage: "proxy takes ca: `boxbroker proxy ca` prints the egress proxy's CA certificate, `boxbroker proxy ca rotate` replaces it", subs: []string{"ca"}},
		"spool":      {summary: "the batches the store refused for good: spool dead list, retry ID, drop ID", run: runSpool, usage: spoolUsage, subs: []string{"dead"}},
	}
	for name, cmd := range proposalCommands() {
		cmds[name] = cmd
	}
	return cmds
}

// wordFirst moves the first of args that is a word (before any "--") to
// the front when args begin with a flag; otherwise it returns args as
// they are.
func wordFirst(args []string, word func(string) bool) []string {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		if word(a) {
			return append(append([]string{a}, args[:i]...), args[i+1:]...)
		}
	}
	return args
}

// subFirst puts the word of a command of several first when flags come
// before it (box --data DIR list is box list --data DIR), and says
// whether args ask only for help (box -h), which the command's own usage
// answers. Flags with no word at all are left out, so the command gives
// its usage.
func subFirst(subs, args []string) (_ []string, help bool) {
	if len(subs) == 0 || len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args, false
	}
	if moved := wordFirst(args, func(a string) bool { return slices.Contains(subs, a) }); slices.Contains(subs, moved[0]) {
		return moved, false
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return nil, true
		}
	}
	return nil, false
}

// cli is what every subcommand shares: its streams and environment.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// environ lists the environment as KEY=VALUE pairs (os.Environ), for
	// the check of its BOXBROKER_* names (warnUnknownEnv); nil checks
	// none.
	environ func() []string
	// again ends at a second SIGINT or SIGTERM (the command's context
	// ends at the first): serve then stops at once instead of letting
	// streams finish. nil for never.
	again context.Context
}

// errUsage marks an error in how a command was called (exit status 2).
var errUsage = errors.New("usage")

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, again := twoSignals(sigs)
	env := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, environ: os.Environ, again: again}
	os.Exit(env.main(ctx, os.Args[1:]))
}

// twoSignals returns first, which ends at the first signal from sigs, and
// second, which ends at the next one.
func twoSignals(sigs <-chan os.Signal) (first, second context.Context) {
	first, stop1 := context.WithCancel(context.Background())
	second, stop2 := context.WithCancel(context.Background())
	go func() {
		<-sigs
		stop1()
		<-sigs
		stop2()
	}()
	return first, second
}

func (c *cli) main(ctx context.Context, args []string) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		c.usage(cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	// Flags before the command (boxbroker --data DIR box list) are taken
	// as if they came after it.
	args = wordFirst(args, func(a string) bool { _, ok := cmds[a]; return ok })
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(c.stderr, "boxbroker: unknown command %s%s\n", proxy.ScrubKept(named(args[0])), didYouMean(args[0], slices.Collect(maps.Keys(cmds))))
		fmt.Fprintln(c.stderr, "usage: boxbroker <command> [flags]; `boxbroker help` lists the commands")
		return 2
	}
	c.warnUnknownEnv()
	rest, help := subFirst(cmd.subs, args[1:])
	run := cmd.run
	if len(cmd.subs) > 0 && len(rest) == 0 {
		run = func(context.Context, *cli, []string) error { return fmt.Errorf("%w: %s", errUsage, cmd.usage) }
	}
	if help {
		// The usage a command of several gives when called bare, as help.
		if err := run(ctx, c, nil); err != nil {
			fmt.Fprintf(c.stderr, "boxbroker %s: %s\n", args[0], shown(err))
		}
		fmt.Fprintf(c.stderr, "each takes -h for its flags, as in boxbroker %s %s -h\n", args[0], cmd.subs[0])
		return 0
	}
	err := run(ctx, c, rest)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(c.stderr, "boxbroker %s: %s\n", args[0], shown(err))
		return 2
	default:
		fmt.Fprintf(c.stderr, "boxbroker %s: %s\n", args[0], shown(err))
		return 1
	}
}

func (c *cli) usage(cmds map[string]command) {
	fmt.Fprintln(c.stderr, "usage: boxbroker <command> [flags]\n\ncommands:")
	for _, n := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(c.stderr, "  %-11s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(c.stderr, "\nEvery command but report, ready, prices and version takes --data DIR (BOXBROKER_DATA) and --store URL (BOXBROKER_STORE);")
	fmt.Fprintln(c.stderr, "flags may come before or after a command's arguments; see boxbroker <command> -h.")
}

// knownEnv lists every BOXBROKER_* variable boxbroker reads, its test
// suite and tools included (TestCLI_KnownEnvIsWhole keeps it whole).
func knownEnv() []string {
	return []string{
		// serve's flags and the CLI's (README, Configuration).
		"BOXBROKER_ADMIN_HOSTS", "BOXBROKER_ADMIN_LISTEN", "BOXBROKER_ANTHROPIC_URL", "BOXBROKER_AUDIT_REQUIRED",
		"BOXBROKER_AUDIT_RETENTION", "BOXBROKER_AUDIT_SINK_BACKLOG", "BOXBROKER_AUDIT_SINK_TOKEN", "BOXBROKER_AUDIT_SINK_URL", "BOXBROKER_BOX_BURST", "BOXBROKER_BOX_CONCURRENT", "BOXBROKER_BOX_RATE",
		"BOXBROKER_BROKER", "BOXBROKER_BUDGET_ALERTS", "BOXBROKER_BUDGET_WEBHOOK", "BOXBROKER_BUDGET_WEBHOOK_KEY", "BOXBROKER_DATA", "BOXBROKER_DECIDE_TIMEOUT", "BOXBROKER_EGRESS_MAX_BODY",
		"BOXBROKER_FEEDBACK", "BOXBROKER_FEEDBACK_MAX_BATCHES", "BOXBROKER_FEEDBACK_MAX_BYTES", "BOXBROKER_FOUNTAIN_URL", "BOXBROKER_LISTEN", "BOXBROKER_LOG_LEVEL",
		"BOXBROKER_MASTER_KEY", "BOXBROKER_MAX_BODY", "BOXBROKER_PAGE_URL", "BOXBROKER_POOL_RETRY_BODY", "BOXBROKER_PRICES",
		"BOXBROKER_PROPOSAL_MAX", "BOXBROKER_PROPOSAL_WAIT", "BOXBROKER_PROPOSAL_WEBHOOK", "BOXBROKER_PROPOSAL_WEBHOOK_KEY",
		"BOXBROKER_PROPOSAL_WEBHOOK_SHAPE",
		"BOXBROKER_PROXY_LISTEN", "BOXBROKER_PROXY_PASSTHROUGH", "BOXBROKER_READ_TIMEOUT",
		"BOXBROKER_RESERVATION_LEASE", "BOXBROKER_RESERVE_MAX_TOKENS", "BOXBROKER_SHUTDOWN_GRACE",
		"BOXBROKER_SSO_CLIENT_ID", "BOXBROKER_SSO_CLIENT_SECRET", "BOXBROKER_SSO_CLIENT_SECRET_FILE", "BOXBROKER_SSO_ISSUER",
		"BOXBROKER_SSO_OPERATORS", "BOXBROKER_SSO_REDIRECT_URL", "BOXBROKER_SSO_ROLE_CLAIM", "BOXBROKER_SSO_SCOPES",
		"BOXBROKER_SSO_VIEWERS",
		"BOXBROKER_STORE", "BOXBROKER_STORE_DEADLINE", "BOXBROKER_TLS_CERT", "BOXBROKER_TLS_KEY",
		"BOXBROKER_TRUSTED_PROXY", "BOXBROKER_UNPRICED_AS", "BOXBROKER_UPSTREAM_TIMEOUT",
		// the CLI against a remote broker, report and ready.
		"BOXBROKER_ADMIN_TOKEN", "BOXBROKER_ADMIN_URL", "BOXBROKER_TOKEN", "BOXBROKER_URL",
		// ./test.sh, .ci and the tests.
		"BOXBROKER_BENCH_BOXES", "BOXBROKER_E2E_CACHE", "BOXBROKER_FULL", "BOXBROKER_FUZZTIME", "BOXBROKER_MEASURE",
		"BOXBROKER_PG_DIR", "BOXBROKER_PG_PORT", "BOXBROKER_REQUIRE_NETWORK", "BOXBROKER_REQUIRE_POSTGRES",
		"BOXBROKER_TEST_FLEET", "BOXBROKER_TEST_HEAPPROFILE", "BOXBROKER_TEST_LOAD_STREAMS", "BOXBROKER_TEST_POSTGRES",
		"BOXBROKER_TEST_STREAM_UPSTREAM",
	}
}

// warnUnknownEnv warns, on stderr, of each BOXBROKER_* variable set in
// the environment that boxbroker does not read, naming the nearest one it
// does: a mistyped name is otherwise silently ignored, and its flag takes
// its default (a mistyped BOXBROKER_ANTHROPIC_URL sends calls to the real
// API).
func (c *cli) warnUnknownEnv() {
	if c.environ == nil {
		return
	}
	known := knownEnv()
	var unknown []string
	for _, kv := range c.environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "BOXBROKER_") && !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		hint := ""
		if n := closest(k, known); n != "" {
			hint = "; did you mean " + n + "?"
		}
		fmt.Fprintf(c.stderr, "boxbroker: warning: the environment variable %s is not one boxbroker reads, so it is ignored%s\n", safe(k), hint)
	}
}

// flags returns a FlagSet with the flags every subcommand shares bound
// into cfg, defaulting from BOXBROKER_* variables.
func (c *cli) flags(name string, cfg *server.Config) *flag.FlagSet {
	fs := flag.NewFlagSet("boxbroker "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&cfg.DataDir, "data", c.envOr("BOXBROKER_DATA", server.DefaultDataDir()), "data directory: SQLite file and master key (BOXBROKER_DATA)")
	fs.StringVar(&cfg.Store, "store", c.getenv("BOXBROKER_STORE"), "postgres:// URL of a PostgreSQL store; empty for SQLite in the data directory (BOXBROKER_STORE)")
	cfg.MasterKey = c.getenv("BOXBROKER_MASTER_KEY")
	return fs
}

func (c *cli) envOr(key, def string) string {
	if v := c.getenv(key); v != "" {
		return v
	}
	return def
}

// openStore opens the store cfg names, for a management command that may
// create it (box add, credential set and add, visitor set, admin token).
// It makes no new database in a data directory whose database has gone
// (server.CheckHasDatabase): `serve --new-store` does that.
func openStore(ctx context.Context, cfg *server.Config) (store.Store, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store == "" {
		if err := server.CheckHasDatabase(cfg.DataDir, false); err != nil {
			return nil, err
		}
	}
	return server.OpenStore(ctx, cfg)
}

// openExisting opens the store cfg names for a command that reads or
// changes what is there: a data directory holding no boxbroker data (a
// mistyped --data) is an error saying so, never a new empty database.
func openExisting(ctx context.Context, cfg *server.Config) (store.Store, error) {
	if err := needData(cfg); err != nil {
		return nil, err
	}
	return openStore(ctx, cfg)
}

// needData reports an error when cfg names an SQLite store whose database
// file does not exist. A PostgreSQL store is not checked here: opening it
// says whether it can be reached.
func needData(cfg *server.Config) error {
	cfg.Defaults()
	if cfg.Store != "" {
		return nil
	}
	db := filepath.Join(cfg.DataDir, server.DBFile)
	if _, err := os.Stat(db); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read the data directory: %w", err)
	}
	return fmt.Errorf("there is no boxbroker data at %s (no %s there): check --data or BOXBROKER_DATA, or create it with `boxbroker box add NAME --data %s`", cfg.DataDir, server.DBFile, cfg.DataDir)
}

// readSecret reads a secret value from stdin: with a prompt and no echo
// from a terminal, or whole (at most 64 KiB, one trailing newline dropped)
// from a pipe. Secrets never come from argv.
func (c *cli) readSecret(prompt string) ([]byte, error) {
	if f, ok := c.stdin.(*os.File); ok && isTerminal(f) {
		fmt.Fprint(c.stderr, prompt)
		b, err := readPassword(f)
		fmt.Fprintln(c.stderr)
		if err != nil {
			return nil, fmt.Errorf("read from terminal: %w", err)
		}
		return trimValue(b)
	}
	b, err := readAtMost(c.stdin, 64<<10, "read stdin", "the value on stdin is over 64 KiB")
	if err != nil {
		return nil, err
	}
	return trimValue(b)
}

// readAtMost reads r whole, when it holds at most n bytes: else the
// error says over. A read error is said after what.
func readAtMost(r io.Reader, n int64, what, over string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, n+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(b)) > n {
		return nil, errors.New(over)
	}
	return b, nil
}

func trimValue(b []byte) ([]byte, error) {
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return nil, errors.New("no value on stdin: what it read was empty (as a variable that is unset or empty reads when piped in); pipe the value in, as in `printf %s \"$KEY\" | boxbroker ...`")
	}
	if strings.ContainsAny(v, "\r\n") {
		return nil, errors.New("the value on stdin holds a line break inside it")
	}
	return []byte(v), nil
}

// checkPrincipal refuses a principal the CLI is given unless it has the
// documented kind:login form (github:ann): a kind of lower-case letters,
// digits and dashes, a colon, and a login, 1 to 200 characters in all,
// with no white space or control character. A bare login such as "octo"
// would name no one the broker or a box can match.
func checkPrincipal(p string) error {
	kind, login, ok := strings.Cut(p, ":")
	good := ok && kind != "" && login != "" && protocol.IsPrincipal(p) &&
		strings.IndexFunc(kind, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) < 0 &&
		strings.IndexFunc(login, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) < 0
	if good {
		return nil
	}
	return fmt.Errorf("%w: %s is not a principal: it is written kind:login, such as github:ann, 1 to %d characters with no white space or control character", errUsage, quiet.Shown(p, protocol.MaxPrincipalLen), protocol.MaxPrincipalLen)
}
