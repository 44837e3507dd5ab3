package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/server"
)

func runServe(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("serve", &cfg)
	fs.StringVar(&cfg.Listen, "listen", c.envOr("BOXBROKER_LISTEN", "127.0.0.1:8787"), "box-facing address (BOXBROKER_LISTEN)")
	fs.StringVar(&cfg.AdminListen, "admin-listen", c.envOr("BOXBROKER_ADMIN_LISTEN", server.DefaultAdminListen), "admin API, metrics and owner's page address; \"off\" serves none (BOXBROKER_ADMIN_LISTEN)")
	fs.StringVar(&cfg.Broker, "broker", c.envOr("BOXBROKER_BROKER", "lobby"), "the broker word this broker answers for (BOXBROKER_BROKER)")
	anthropic := fs.String("anthropic-url", c.envOr("BOXBROKER_ANTHROPIC_URL", "https://api.anthropic.com"), "Anthropic API upstream (BOXBROKER_ANTHROPIC_URL)")
	fountain := fs.String("fountain-url", c.getenv("BOXBROKER_FOUNTAIN_URL"), "Fountain API upstream; empty serves no /fountain (BOXBROKER_FOUNTAIN_URL)")
	fs.StringVar(&cfg.Feedback, "feedback", c.envOr("BOXBROKER_FEEDBACK", server.FeedbackKeep), "keep: store feedback batches from consenting boxes; off: answer 501 so boxes keep them (BOXBROKER_FEEDBACK)")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", envDuration(c, "BOXBROKER_SHUTDOWN_GRACE", 30*time.Second), "how long in-flight streams may finish on SIGINT/SIGTERM (BOXBROKER_SHUTDOWN_GRACE)")
	fs.DurationVar(&cfg.UpstreamHeaderTimeout, "upstream-timeout", envDuration(c, "BOXBROKER_UPSTREAM_TIMEOUT", 10*time.Minute), "bound on the wait for an upstream's answer headers (BOXBROKER_UPSTREAM_TIMEOUT)")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", envDuration(c, "BOXBROKER_READ_TIMEOUT", 10*time.Minute), "bound on reading a request, its body included; never on an answer's stream (BOXBROKER_READ_TIMEOUT)")
	fs.DurationVar(&cfg.DecideTimeout, "decide-timeout", envDuration(c, "BOXBROKER_DECIDE_TIMEOUT", 30*time.Second), "bound on answering one decide request, every question included (BOXBROKER_DECIDE_TIMEOUT)")
	fs.Int64Var(&cfg.MaxBody, "max-body", envInt(c, "BOXBROKER_MAX_BODY", 64<<20), "bound on a forwarded request body, bytes (BOXBROKER_MAX_BODY)")
	fs.Int64Var(&cfg.EgressMaxBody, "egress-max-body", envInt(c, "BOXBROKER_EGRESS_MAX_BODY", 256<<20), "bound on a request body sent to an egress secret's host, bytes (BOXBROKER_EGRESS_MAX_BODY)")
	fs.DurationVar(&cfg.AuditRetention, "audit-retention", envDuration(c, "BOXBROKER_AUDIT_RETENTION", 30*24*time.Hour), "how long audit log entries are kept (BOXBROKER_AUDIT_RETENTION)")
	fs.StringVar(&cfg.LogLevel, "log-level", c.envOr("BOXBROKER_LOG_LEVEL", "info"), "debug, info, warn or error (BOXBROKER_LOG_LEVEL)")
	fs.Float64Var(&cfg.BoxRate, "box-rate", envFloat(c, "BOXBROKER_BOX_RATE", 0), "requests per second one box may make; 0 for no bound (BOXBROKER_BOX_RATE)")
	fs.IntVar(&cfg.BoxBurst, "box-burst", int(envInt(c, "BOXBROKER_BOX_BURST", 0)), "requests above --box-rate a box may make at once; 0 for the rate (BOXBROKER_BOX_BURST)")
	fs.IntVar(&cfg.BoxConcurrent, "box-concurrent", int(envInt(c, "BOXBROKER_BOX_CONCURRENT", 256)), "requests one box may have in flight, streams included; -1 for no bound (BOXBROKER_BOX_CONCURRENT)")
	fs.StringVar(&cfg.Prices, "prices", c.getenv("BOXBROKER_PRICES"), "JSON price file over the default price table, in dollars per million tokens (BOXBROKER_PRICES)")
	fs.Int64Var(&cfg.ReserveMaxTokens, "reserve-max-tokens", envInt(c, "BOXBROKER_RESERVE_MAX_TOKENS", 64000), "output tokens reserved against a budget for a Messages call whose body is too large to read (BOXBROKER_RESERVE_MAX_TOKENS)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", c.getenv("BOXBROKER_TLS_CERT"), "PEM certificate to serve TLS with (BOXBROKER_TLS_CERT)")
	fs.StringVar(&cfg.TLSKey, "tls-key", c.getenv("BOXBROKER_TLS_KEY"), "PEM private key for --tls-cert (BOXBROKER_TLS_KEY)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments, got %q", errUsage, fs.Args())
	}
	if cfg.AdminListen == "" {
		cfg.AdminListen = "off"
	}
	var err error
	if cfg.AnthropicURL, err = parseURL("anthropic-url", *anthropic); err != nil {
		return err
	}
	if *fountain != "" {
		if cfg.FountainURL, err = parseURL("fountain-url", *fountain); err != nil {
			return err
		}
	}
	srv, err := server.New(ctx, cfg, server.Options{})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", srv.Config.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(c.stdout, "boxbroker %s listening on %s://%s\n", srv.Config.Broker, scheme, ln.Addr())
	var admin net.Listener
	if srv.Config.AdminEnabled() {
		if admin, err = net.Listen("tcp", srv.Config.AdminListen); err != nil {
			ln.Close()
			return fmt.Errorf("listen for the admin API: %w", err)
		}
		fmt.Fprintf(c.stdout, "admin API, metrics and owner's page on %s://%s\n", scheme, admin.Addr())
	}
	fmt.Fprintf(c.stdout, "data: %s\n", server.StoreWhere(&srv.Config))
	return srv.Serve(ctx, ln, admin)
}

func parseURL(name, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: --%s: %v", errUsage, name, err)
	}
	return u, nil
}

func envDuration(c *cli, key string, def time.Duration) time.Duration {
	if v := c.getenv(key); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envFloat(c *cli, key string, def float64) float64 {
	if v := c.getenv(key); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
	}
	return def
}

func envInt(c *cli, key string, def int64) int64 {
	if v := c.getenv(key); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}
