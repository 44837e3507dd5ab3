package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

func runServe(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	def := server.DefaultConfig()
	env := &envReader{c: c}
	fs := c.flags("serve", &cfg)
	fs.StringVar(&cfg.Listen, "listen", c.envOr("BOXBROKER_LISTEN", def.Listen), "box-facing address (BOXBROKER_LISTEN)")
	fs.StringVar(&cfg.AdminListen, "admin-listen", c.envOr("BOXBROKER_ADMIN_LISTEN", def.AdminListen), "admin API, metrics and owner's page address; \"off\" serves none (BOXBROKER_ADMIN_LISTEN)")
	adminHosts := fs.String("admin-hosts", c.getenv("BOXBROKER_ADMIN_HOSTS"), "host names, comma-separated, the admin listener is reached by besides localhost and IP addresses; a request naming any other host is refused (BOXBROKER_ADMIN_HOSTS)")
	fs.StringVar(&cfg.Broker, "broker", c.envOr("BOXBROKER_BROKER", def.Broker), "the broker word this broker answers for (BOXBROKER_BROKER)")
	anthropic := fs.String("anthropic-url", c.envOr("BOXBROKER_ANTHROPIC_URL", def.AnthropicURL.String()), "Anthropic API upstream (BOXBROKER_ANTHROPIC_URL)")
	alerts := fs.String("budget-alerts", c.getenv("BOXBROKER_BUDGET_ALERTS"), "percentages of a budget's limit that alert when its charges cross them, such as 80,100 (BOXBROKER_BUDGET_ALERTS)")
	webhook := fs.String("budget-webhook", c.getenv("BOXBROKER_BUDGET_WEBHOOK"), "URL that receives each budget alert as signed JSON; the key is BOXBROKER_BUDGET_WEBHOOK_KEY (BOXBROKER_BUDGET_WEBHOOK)")
	fountain := fs.String("fountain-url", c.getenv("BOXBROKER_FOUNTAIN_URL"), "Fountain API upstream; empty serves no /fountain (BOXBROKER_FOUNTAIN_URL)")
	fs.StringVar(&cfg.Feedback, "feedback", c.envOr("BOXBROKER_FEEDBACK", def.Feedback), "keep: store feedback batches from consenting boxes; off: answer 501 so boxes keep them (BOXBROKER_FEEDBACK)")
	fs.IntVar(&cfg.FeedbackMaxBatches, "feedback-max-batches", int(envValue(env, "BOXBROKER_FEEDBACK_MAX_BATCHES", int64(def.FeedbackMaxBatches))), "feedback batches one box keeps; a new one past it drops the box's oldest (BOXBROKER_FEEDBACK_MAX_BATCHES)")
	fs.Int64Var(&cfg.FeedbackMaxBytes, "feedback-max-bytes", envValue(env, "BOXBROKER_FEEDBACK_MAX_BYTES", def.FeedbackMaxBytes), "bytes of feedback batches one box keeps; a new batch past it drops the box's oldest (BOXBROKER_FEEDBACK_MAX_BYTES)")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", envValue(env, "BOXBROKER_SHUTDOWN_GRACE", def.ShutdownGrace), "how long in-flight streams may finish on SIGINT/SIGTERM (BOXBROKER_SHUTDOWN_GRACE)")
	fs.DurationVar(&cfg.UpstreamHeaderTimeout, "upstream-timeout", envValue(env, "BOXBROKER_UPSTREAM_TIMEOUT", def.UpstreamHeaderTimeout), "bound on the wait for an upstream's answer headers (BOXBROKER_UPSTREAM_TIMEOUT)")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", envValue(env, "BOXBROKER_READ_TIMEOUT", def.ReadTimeout), "bound on reading a request, its body included; never on an answer's stream (BOXBROKER_READ_TIMEOUT)")
	fs.DurationVar(&cfg.DecideTimeout, "decide-timeout", envValue(env, "BOXBROKER_DECIDE_TIMEOUT", def.DecideTimeout), "bound on answering one decide request, every question included (BOXBROKER_DECIDE_TIMEOUT)")
	fs.Int64Var(&cfg.MaxBody, "max-body", envValue(env, "BOXBROKER_MAX_BODY", def.MaxBody), "bound on a forwarded request body, bytes (BOXBROKER_MAX_BODY)")
	fs.Int64Var(&cfg.PoolRetryBody, "pool-retry-body", envValue(env, "BOXBROKER_POOL_RETRY_BODY", def.PoolRetryBody), "bound on a request body kept in memory to retry a call on another credential of the pool, bytes; -1 never retries (BOXBROKER_POOL_RETRY_BODY)")
	fs.Int64Var(&cfg.EgressMaxBody, "egress-max-body", envValue(env, "BOXBROKER_EGRESS_MAX_BODY", def.EgressMaxBody), "bound on a request body sent to an egress secret's host, bytes (BOXBROKER_EGRESS_MAX_BODY)")
	fs.DurationVar(&cfg.ProposalWait, "proposal-wait", envValue(env, "BOXBROKER_PROPOSAL_WAIT", def.ProposalWait), "how long a proposal waits for a person before it expires (BOXBROKER_PROPOSAL_WAIT)")
	fs.IntVar(&cfg.ProposalMax, "proposal-max", int(envValue(env, "BOXBROKER_PROPOSAL_MAX", int64(def.ProposalMax))), "pending proposals each box may have; more refusals open none (BOXBROKER_PROPOSAL_MAX)")
	fs.StringVar(&cfg.PageURL, "page-url", c.getenv("BOXBROKER_PAGE_URL"), "the owner's page as a person reaches it, named in refusals that open a proposal (BOXBROKER_PAGE_URL)")
	fs.StringVar(&cfg.ProposalWebhook, "proposal-webhook", c.getenv("BOXBROKER_PROPOSAL_WEBHOOK"), "URL each new proposal is POSTed to, signed with BOXBROKER_PROPOSAL_WEBHOOK_KEY (BOXBROKER_PROPOSAL_WEBHOOK)")
	fs.StringVar(&cfg.ProposalWebhookShape, "proposal-webhook-shape", c.envOr("BOXBROKER_PROPOSAL_WEBHOOK_SHAPE", def.ProposalWebhookShape), "json or slack (BOXBROKER_PROPOSAL_WEBHOOK_SHAPE)")
	cfg.ProposalWebhookKey = c.getenv("BOXBROKER_PROPOSAL_WEBHOOK_KEY")
	fs.DurationVar(&cfg.AuditRetention, "audit-retention", envValue(env, "BOXBROKER_AUDIT_RETENTION", def.AuditRetention), "how long audit log entries are kept (BOXBROKER_AUDIT_RETENTION)")
	auditSink := fs.String("audit-sink-url", c.getenv("BOXBROKER_AUDIT_SINK_URL"), "http(s) URL the audit rows are POSTed to as JSON lines, at least once and in order; empty for none; its bearer token, if any, in BOXBROKER_AUDIT_SINK_TOKEN (BOXBROKER_AUDIT_SINK_URL)")
	fs.IntVar(&cfg.AuditSinkBacklog, "audit-sink-backlog", int(envValue(env, "BOXBROKER_AUDIT_SINK_BACKLOG", int64(def.AuditSinkBacklog))), "audit rows kept in the data directory while the audit sink does not take them; past it the oldest are dropped (BOXBROKER_AUDIT_SINK_BACKLOG)")
	fs.DurationVar(&cfg.StoreDeadline, "store-deadline", envValue(env, "BOXBROKER_STORE_DEADLINE", def.StoreDeadline), "bound on each store call a request makes; past it the request gets 503 with Retry-After (BOXBROKER_STORE_DEADLINE)")
	fs.StringVar(&cfg.LogLevel, "log-level", c.envOr("BOXBROKER_LOG_LEVEL", def.LogLevel), "debug, info, warn or error (BOXBROKER_LOG_LEVEL)")
	fs.Float64Var(&cfg.BoxRate, "box-rate", envValue(env, "BOXBROKER_BOX_RATE", def.BoxRate), "requests per second one box may make; 0 for no bound (BOXBROKER_BOX_RATE)")
	fs.IntVar(&cfg.BoxBurst, "box-burst", int(envValue(env, "BOXBROKER_BOX_BURST", int64(def.BoxBurst))), "requests above --box-rate a box may make at once; 0 for the rate (BOXBROKER_BOX_BURST)")
	fs.IntVar(&cfg.BoxConcurrent, "box-concurrent", int(envValue(env, "BOXBROKER_BOX_CONCURRENT", int64(def.BoxConcurrent))), "requests one box may have in flight, streams included; -1 for no bound (BOXBROKER_BOX_CONCURRENT)")
	fs.StringVar(&cfg.Prices, "prices", c.getenv("BOXBROKER_PRICES"), "JSON price file over the default price table, in dollars per million tokens (BOXBROKER_PRICES)")
	fs.StringVar(&cfg.UnpricedAs, "unpriced-as", c.getenv("BOXBROKER_UNPRICED_AS"), "model of the price table whose price a call of a model neither in it nor of a family in it is charged at; empty for the dearest in the table (BOXBROKER_UNPRICED_AS; boxbroker prices lists the table)")
	fs.Int64Var(&cfg.ReserveMaxTokens, "reserve-max-tokens", envValue(env, "BOXBROKER_RESERVE_MAX_TOKENS", def.ReserveMaxTokens), "output tokens reserved against a budget for a Messages call whose body is too large to read (BOXBROKER_RESERVE_MAX_TOKENS)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", c.getenv("BOXBROKER_TLS_CERT"), "PEM certificate to serve TLS with (BOXBROKER_TLS_CERT)")
	tlsKey := c.secretPathFlag(fs, "tls-key", "BOXBROKER_TLS_KEY", "PEM private key for --tls-cert (BOXBROKER_TLS_KEY)")
	proxyListen := fs.String("proxy-listen", c.getenv("BOXBROKER_PROXY_LISTEN"), "egress as an HTTPS proxy on this address; empty for none (BOXBROKER_PROXY_LISTEN)")
	proxyPass := fs.String("proxy-passthrough", c.getenv("BOXBROKER_PROXY_PASSTHROUGH"), "hosts (host or host:port, comma-separated) the egress proxy tunnels untouched (BOXBROKER_PROXY_PASSTHROUGH)")
	fs.DurationVar(&cfg.ReservationLease, "reservation-lease", envValue(env, "BOXBROKER_RESERVATION_LEASE", def.ReservationLease), "how long a budget's reservation is held without its replica renewing it; a crashed replica's reservations free after it (BOXBROKER_RESERVATION_LEASE)")
	trusted := &prefixList{env: "BOXBROKER_TRUSTED_PROXY"}
	if v := c.getenv("BOXBROKER_TRUSTED_PROXY"); v != "" {
		if err := trusted.add(v); err != nil {
			return fmt.Errorf("configuration: --trusted-proxy (BOXBROKER_TRUSTED_PROXY): %w", err)
		}
	}
	fs.Var(trusted, "trusted-proxy", "front proxy (CIDR, repeatable or comma-separated) whose X-Forwarded-For is believed when judging where a box's request came from; none: the peer's address (BOXBROKER_TRUSTED_PROXY)")
	fs.BoolVar(&cfg.NewStore, "new-store", false, "make a new, empty SQLite database in a data directory that holds a master key, a journal or a spool but no database; without it serve refuses to start there")
	auditRequired := fs.Bool("audit-required", envValue(env, "BOXBROKER_AUDIT_REQUIRED", !def.AuditOptional), "refuse calls (503) while their audit record can be written neither to the store nor to the spool; false serves them unrecorded (BOXBROKER_AUDIT_REQUIRED)")
	ssoConfig := ssoFlags(fs, c)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg.TLSKey = tlsKey()
	var err error
	if cfg.SSO, err = ssoConfig(); err != nil {
		return err
	}
	cfg.AuditOptional = !*auditRequired
	cfg.TrustedProxies = trusted.list
	cfg.AdminHosts = list(*adminHosts)
	// A malformed BOXBROKER_* value is an error naming the variable, never
	// quietly the default; a flag given overrides its variable.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	env.oneOf("BOXBROKER_FEEDBACK", "keep or off", server.FeedbackKeep, server.FeedbackOff)
	env.oneOf("BOXBROKER_LOG_LEVEL", "debug, info, warn or error", "debug", "info", "warn", "error")
	env.hostPort("BOXBROKER_LISTEN", false)
	env.hostPort("BOXBROKER_ADMIN_LISTEN", true)
	env.hostPort("BOXBROKER_PROXY_LISTEN", false)
	if err := env.err(set); err != nil {
		return err
	}
	if err := checkBounds(fs, set, c.getenv); err != nil {
		return err
	}
	pass, err := passthroughHosts(*proxyPass)
	if err != nil {
		return err
	}
	if len(pass) > 0 && *proxyListen == "" {
		fmt.Fprintln(c.stderr, "warning: --proxy-passthrough (BOXBROKER_PROXY_PASSTHROUGH) is set but --proxy-listen (BOXBROKER_PROXY_LISTEN) is not: no egress proxy runs, so it does nothing")
	}
	warnURLInArgv(c, set, map[string]string{"proposal-webhook": cfg.ProposalWebhook, "budget-webhook": *webhook, "audit-sink-url": *auditSink})
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments, got %s", errUsage, namedAll(fs.Args()))
	}
	if cfg.AdminListen == "" {
		cfg.AdminListen = "off"
	}
	if cfg.AnthropicURL, err = parseURL("anthropic-url", *anthropic); err != nil {
		return err
	}
	if *fountain != "" {
		if cfg.FountainURL, err = parseURL("fountain-url", *fountain); err != nil {
			return err
		}
	}
	if *auditSink != "" {
		if cfg.AuditSinkURL, err = url.Parse(*auditSink); err != nil {
			return fmt.Errorf("configuration: --audit-sink-url (BOXBROKER_AUDIT_SINK_URL) is not a URL")
		}
		cfg.AuditSinkToken = c.getenv("BOXBROKER_AUDIT_SINK_TOKEN")
	}
	if cfg.BudgetAlerts, err = spend.ParseThresholds(*alerts); err != nil {
		return fmt.Errorf("%w: --budget-alerts (BOXBROKER_BUDGET_ALERTS): %v", errUsage, err)
	}
	if *webhook != "" {
		if cfg.BudgetWebhook, err = parseURL("budget-webhook", *webhook); err != nil {
			return err
		}
		if cfg.BudgetWebhookKey = []byte(c.getenv("BOXBROKER_BUDGET_WEBHOOK_KEY")); len(cfg.BudgetWebhookKey) == 0 {
			return fmt.Errorf("%w: --budget-webhook needs BOXBROKER_BUDGET_WEBHOOK_KEY, the key its alerts are signed with", errUsage)
		}
		if len(cfg.BudgetAlerts) == 0 {
			return fmt.Errorf("%w: --budget-webhook needs --budget-alerts (BOXBROKER_BUDGET_ALERTS), the thresholds that alert", errUsage)
		}
	}
	// Every listener is taken before the store and the data directory
	// are opened: a serve that cannot listen changes nothing on disk.
	lns, err := listenAll(cfg, *proxyListen)
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, cfg, server.Options{})
	if err != nil {
		lns.close()
		return err
	}
	defer srv.Close()
	if err := warnNoCredential(ctx, c, srv); err != nil {
		lns.close()
		return err
	}
	ln, admin := lns.box, lns.admin
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	sc := &srv.Config
	fmt.Fprintf(c.stdout, "boxbroker %s listening on %s://%s\n", sc.Broker, scheme, ln.Addr())
	if admin != nil {
		fmt.Fprintf(c.stdout, "admin API, metrics and owner's page on %s://%s\n", scheme, admin.Addr())
		fmt.Fprintf(c.stdout, "owner's page: %s\n", pageURL(scheme, admin.Addr()))
		if len(sc.AdminHosts) > 0 {
			fmt.Fprintf(c.stdout, "admin API also reached as: %s (besides localhost and IP addresses)\n", strings.Join(sc.AdminHosts, ", "))
		}
	} else {
		fmt.Fprintln(c.stdout, "admin API: off")
	}
	fmt.Fprintf(c.stdout, "broker word: %s\n", sc.Broker)
	fmt.Fprintf(c.stdout, "anthropic upstream: %s\n", sc.AnthropicURL.Redacted())
	if sc.FountainURL != nil {
		fmt.Fprintf(c.stdout, "fountain upstream: %s\n", sc.FountainURL.Redacted())
	} else {
		fmt.Fprintln(c.stdout, "fountain upstream: none (no /fountain)")
	}
	if sc.Store == "" {
		fmt.Fprintf(c.stdout, "store: SQLite, %s\n", server.StoreWhere(sc))
	} else {
		fmt.Fprintf(c.stdout, "store: PostgreSQL, %s\n", server.StoreWhere(sc))
	}
	fmt.Fprintf(c.stdout, "data: %s\n", sc.DataDir)
	served := make(chan struct{})
	defer close(served)
	go c.stopping(ctx, srv, served)
	if lns.proxy != nil {
		pctx, stop := context.WithCancel(ctx)
		wait, err := startProxy(pctx, c, srv, lns.proxy, pass)
		if err != nil {
			stop()
			lns.close()
			return err
		}
		err = srv.Serve(ctx, ln, admin)
		stop()
		return errors.Join(err, wait())
	}
	return srv.Serve(ctx, ln, admin)
}

// warnURLInArgv warns of each URL flag given on the command line (set)
// whose URL, as given, may hold a credential: a user, a query (a log
// service's key, ?dd-api-key=…), or for a webhook a path too (a Slack or
// Teams incoming webhook's path is its credential). serve's argv is read
// by every user of the machine. The warning names the flag and its
// variable, never the URL.
func warnURLInArgv(c *cli, set map[string]bool, given map[string]string) {
	for _, f := range []struct {
		flag, env string
		path      bool // a path may be the credential
	}{
		{"proposal-webhook", "BOXBROKER_PROPOSAL_WEBHOOK", true},
		{"budget-webhook", "BOXBROKER_BUDGET_WEBHOOK", true},
		{"audit-sink-url", "BOXBROKER_AUDIT_SINK_URL", false},
	} {
		u, err := url.Parse(given[f.flag])
		if !set[f.flag] || err == nil && u.User == nil && (!f.path || strings.Trim(u.Path, "/") == "") && u.RawQuery == "" && u.Opaque == "" {
			continue
		}
		fmt.Fprintf(c.stderr, "warning: --%s is given on the command line, which every user of this machine reads (ps, /proc): its URL may hold a credential (a webhook's path, a key in a query); set %s instead\n", f.flag, f.env)
	}
}

// warnNoCredential warns when the store holds no shared Anthropic
// credential and no pool entry: every model call of a box paid by the
// shared credential is then refused, and nothing else says so until a
// box calls.
func warnNoCredential(ctx context.Context, c *cli, srv *server.Server) error {
	_, err := srv.Store.Credential(ctx, payer.SharedAnthropic)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read the shared Anthropic credential: %w", err)
	}
	entries, err := srv.Store.PoolEntries(ctx)
	if err != nil {
		return fmt.Errorf("read the Anthropic credential pool: %w", err)
	}
	if len(entries) > 0 {
		return nil
	}
	fmt.Fprintln(c.stderr, "warning: no Anthropic credential is set: every model call of a box the shared credential pays for is refused until one is "+
		"(`boxbroker credential set anthropic`, reading the key or setup token from stdin); boxes paid by their owner or a visitor's grant use theirs")
	return nil
}

// listeners are serve's: the box-facing one, the admin one (nil when
// off) and the egress proxy's (nil when none).
type listeners struct {
	box, admin, proxy net.Listener
}

func (l listeners) close() {
	for _, ln := range []net.Listener{l.box, l.admin, l.proxy} {
		if ln != nil {
			ln.Close()
		}
	}
}

// listenAll takes the addresses cfg (with its defaults) and proxyListen
// name, closing those it took when one cannot be had. A configuration
// that does not validate is its error, as server.New would give it.
func listenAll(cfg server.Config, proxyListen string) (listeners, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return listeners{}, err
	}
	var l listeners
	var err error
	if l.box, err = net.Listen("tcp", cfg.Listen); err != nil {
		return listeners{}, fmt.Errorf("listen on %s (--listen, BOXBROKER_LISTEN): %w", cfg.Listen, err)
	}
	if cfg.AdminEnabled() {
		if l.admin, err = net.Listen("tcp", cfg.AdminListen); err != nil {
			l.close()
			return listeners{}, fmt.Errorf("listen for the admin API on %s (--admin-listen, BOXBROKER_ADMIN_LISTEN; off for none): %w", cfg.AdminListen, err)
		}
	}
	if proxyListen != "" {
		if l.proxy, err = net.Listen("tcp", proxyListen); err != nil {
			l.close()
			return listeners{}, fmt.Errorf("listen for the egress proxy on %s (--proxy-listen, BOXBROKER_PROXY_LISTEN): %w", proxyListen, err)
		}
	}
	return l, nil
}

// stopping says, at the first signal (ctx's end), that serve is
// stopping and how a second signal stops it at once, and calls
// srv.StopNow at that second signal (c.again's end); it returns when
// served is closed.
func (c *cli) stopping(ctx context.Context, srv *server.Server, served <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-served:
		return
	}
	fmt.Fprintf(c.stderr, "boxbroker serve: stopping: /readyz answers 503, no new connections; calls in flight have %s (--shutdown-grace) to finish; interrupt again (Ctrl-C, SIGTERM) to stop them at once\n", srv.Config.ShutdownGrace)
	if c.again == nil {
		return
	}
	select {
	case <-c.again.Done():
		fmt.Fprintln(c.stderr, "boxbroker serve: stopping at once: closing the calls in flight")
		srv.StopNow()
	case <-served:
	}
}

func parseURL(name, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // not the URL, which may hold a credential
		}
		return nil, fmt.Errorf("%w: --%s is not a URL: %v", errUsage, name, err)
	}
	return u, nil
}

// envReader reads serve's numeric BOXBROKER_* variables, keeping every
// malformed one to report instead of falling back to the default.
type envReader struct {
	c   *cli
	bad map[string]string // flag name → what is wrong with its variable
}

// flagOf is the flag a variable defaults: BOXBROKER_BOX_RATE → box-rate.
func flagOf(key string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(key, "BOXBROKER_")), "_", "-")
}

// envOf is the variable that defaults a flag, flagOf's inverse:
// box-rate → BOXBROKER_BOX_RATE.
func envOf(flag string) string {
	return "BOXBROKER_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (e *envReader) note(key, v, want string) {
	if e.bad == nil {
		e.bad = map[string]string{}
	}
	e.bad[flagOf(key)] = fmt.Sprintf("%s=%s is not %s", key, quiet.Shown(v, maxValueShown), want)
}

// envValue is key's value read as its flag reads a T, def when it is
// unset; a value it does not read is noted, saying what it is to be
// (wants), and gives def.
func envValue[T time.Duration | float64 | int64 | bool](e *envReader, key string, def T) T {
	v := e.c.getenv(key)
	if v == "" {
		return def
	}
	var x any
	var err error
	switch any(def).(type) {
	case time.Duration:
		x, err = time.ParseDuration(v)
	case float64:
		x, err = strconv.ParseFloat(v, 64)
	case int64:
		x, err = strconv.ParseInt(v, 10, 64)
	case bool:
		x, err = strconv.ParseBool(v)
	}
	if err != nil {
		e.note(key, v, wants(def))
		return def
	}
	return x.(T)
}

// oneOf notes key when it is set to none of allowed.
func (e *envReader) oneOf(key, want string, allowed ...string) {
	if v := e.c.getenv(key); v != "" && !slices.Contains(allowed, v) {
		e.note(key, v, want)
	}
}

// hostPort notes key when it is set to no host:port (nor "off", where
// that is allowed).
func (e *envReader) hostPort(key string, offAllowed bool) {
	v := e.c.getenv(key)
	if v == "" || (offAllowed && v == "off") {
		return
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		want := "a host:port such as 127.0.0.1:8787"
		if offAllowed {
			want = "a host:port such as 127.0.0.1:8788, or off"
		}
		e.note(key, v, want)
	}
}

// err reports every malformed variable whose flag was not given.
func (e *envReader) err(given map[string]bool) error {
	var p []string
	for name, msg := range e.bad {
		if !given[name] {
			p = append(p, msg)
		}
	}
	if len(p) == 0 {
		return nil
	}
	sort.Strings(p)
	return fmt.Errorf("configuration: %s; serve does not start with a malformed value", strings.Join(p, "; "))
}

// checkBounds refuses a numeric setting that parses but that serve would
// not take as given: a negative bound, a rate that is NaN or infinite, or
// a 0 that the broker would quietly replace with its default. Each is
// named as it was given, the flag or else its BOXBROKER_* variable, with
// its value and what it expects.
func checkBounds(fs *flag.FlagSet, given map[string]bool, getenv func(string) string) error {
	// noBound is what -1 means for the whole numbers that take it.
	noBound := map[string]string{"box-concurrent": "-1 for no bound", "pool-retry-body": "-1 to never retry"}
	var p []string
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var bad bool
		var want string
		switch v := g.Get().(type) {
		case time.Duration:
			bad, want = v <= 0, "a duration above 0, such as 30s"
		case float64:
			bad, want = math.IsNaN(v) || math.IsInf(v, 0) || v < 0, "a number of 0 or more, such as 5 or 0.5"
		case int, int64:
			n, _ := strconv.ParseInt(f.Value.String(), 10, 64)
			switch {
			case f.Name == "box-burst":
				bad, want = n < 0, "a whole number of 0 or more"
			case noBound[f.Name] != "":
				bad, want = n == 0 || n < -1, "a whole number above 0, or "+noBound[f.Name]
			default:
				bad, want = n <= 0, "a whole number above 0"
			}
		default:
			return
		}
		if !bad {
			return
		}
		if given[f.Name] {
			p = append(p, fmt.Sprintf("--%s %s is not %s", f.Name, f.Value, want))
			return
		}
		key := envOf(f.Name)
		p = append(p, fmt.Sprintf("%s=%q is not %s", key, getenv(key), want))
	})
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("configuration: %s; serve does not start with a value out of range", strings.Join(p, "; "))
}

// pageURL is the owner's page's address on the admin listener at addr,
// an address of every interface written as the loopback one.
func pageURL(scheme string, addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String() + "/ui/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return (&url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port), Path: "/ui/"}).String()
}

// prefixList is a flag of CIDRs, repeatable or comma-separated, whose
// first use on the command line replaces what its variable (env) gave.
type prefixList struct {
	env     string
	list    []netip.Prefix
	fromArg bool
}

func (p *prefixList) String() string {
	if p == nil {
		return ""
	}
	return store.FormatFrom(p.list)
}

// Set adds the CIDRs of one --trusted-proxy.
func (p *prefixList) Set(v string) error {
	if !p.fromArg {
		p.fromArg, p.list = true, nil
	}
	return p.add(v)
}

func (p *prefixList) add(v string) error {
	l, err := store.ParseFrom(v)
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("%q names no proxy: give a CIDR, such as 10.0.0.0/8", v)
	}
	p.list = append(p.list, l...)
	return nil
}
