package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/decide"
	"github.com/intentius/boxbroker/internal/egress"
	"github.com/intentius/boxbroker/internal/feedback"
	"github.com/intentius/boxbroker/internal/fountain"
	"github.com/intentius/boxbroker/internal/inference"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/ratelimit"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// DBFile is the SQLite file's name in the data directory.
const DBFile = "boxbroker.db"

// writeBound is the bound on a store write made beside requests (an
// audit batch, a settlement, a poll of the change log) and on the
// readiness check's write to the disk: five store deadlines, at least a
// second.
func writeBound(d time.Duration) time.Duration { return max(5*d, time.Second) }

// auditLinger is how long the audit log's writer waits to gather entries
// into one transaction: at a few thousand requests a second, a handful of
// transactions a second rather than one per request or two.
const auditLinger = 50 * time.Millisecond

// Server is a running boxbroker: its store, cache and handler.
type Server struct {
	Config  Config
	Store   store.Store
	Cache   *cache.Cache
	Keyring *secrets.Keyring
	Payer   *payer.Resolver
	// Meter measures model calls and holds them to budgets.
	Meter *spend.Meter
	// Rates holds model calls to token-rate limits.
	Rates *ratelimit.Limiter
	// Alerter gives budget alerts; nil without thresholds.
	Alerter *spend.Alerter
	// Broker is the box-facing handler, and Handler the same as an http.Handler.
	Broker  *broker.Server
	Handler http.Handler
	// Admin is the admin listener's handler: the admin API, metrics,
	// health and, on its routes, the owner's page.
	Admin *admin.Server
	// Approvals opens, decides and matches proposals (package approval).
	Approvals *approval.Service
	// webhook sends new proposals to the operator's URL; nil for none.
	webhook *approval.Webhook
	// Page is the owner's page, served under /ui/ by Admin.
	Page *ui.Page
	// Metrics are the broker's Prometheus metrics, served on the admin
	// listener at /metrics.
	Metrics *metrics.Metrics
	log     *slog.Logger
	// bound bounds every operation of the store New opened, beneath
	// database/sql (package deadline): StoreDeadline on a request's
	// calls, writeBound on the writes made beside requests, none on the
	// admin API's.
	bound *deadline.Bound
	// Outbox keeps the records of the calls answered until the store
	// takes them: its Journal keeps them until the store or its Spool
	// takes them, and its Audit writes the audit log.
	*outbox.Outbox
	// disk is the readiness check's write to the data directory.
	disk diskProbe
	// pinging shares the readiness check's ping of the store.
	pinging singleflight.Group
	// storeWrites is the readiness check's judge of the store's writes.
	storeWrites writesProbe
	// flushLog writes out the log lines that wait in its buffer.
	flushLog func() error
	// cert is the box-facing (and admin) listeners' TLS certificate,
	// loaded from TLSCert and TLSKey by New; nil when they serve plain
	// HTTP.
	cert *tls.Certificate
	// stop is how far Serve's stop has gone (shutdown.go).
	stop stopState
	// lock is the SQLite data directory's lock, held until Close; nil
	// for PostgreSQL, or a store the caller gave.
	lock *dirLock
	// storeFile watches the SQLite database file's identity; nil for
	// PostgreSQL.
	storeFile *fileWatch
	// tracing traces box calls; nil when off.
	tracing *telemetry.Tracing
	// sink streams the audit rows out; nil when none is configured.
	sink *auditsink.Sink
}

// Options are what a caller adds in Go rather than configuration.
type Options struct {
	// Logger receives the server's logs (default: JSON on stderr at cfg.LogLevel).
	Logger *slog.Logger
	// Extra are capabilities an operator adds, served beside the standard ones.
	Extra []capability.Capability
	// Store, when set, is used instead of opening the one cfg names.
	Store store.Store
	// Tracing, when set, traces box calls (package telemetry); when
	// nil, New makes it from the OTEL_* variables, none when they ask
	// for none.
	Tracing *telemetry.Tracing
	// Transport, when set, carries every upstream request.
	Transport http.RoundTripper
	// MintTransport, when set, carries egress's minting requests to token
	// endpoints (package mint's own transport otherwise).
	MintTransport http.RoundTripper
	// Now, when set, is the clock grants expire by (default time.Now).
	Now func() time.Time
	// OnGrant, when set, is told the outcome of every chant-grant header
	// checked (see payer.Resolver.OnGrant), for metrics.
	OnGrant func(outcome string)
	// SpendNow, when set, is the clock budgets' months are told by
	// (default time.Now), for tests of a month's end.
	SpendNow func() time.Time
	// PoolNow, when set, is the clock the credential pool cools and
	// fails its entries by (default time.Now), for tests of a cooling's
	// end.
	PoolNow func() time.Time
	// TokenNow, when set, is the clock box tokens expire by, and a
	// rotation's grace ends by (default time.Now), for tests of their
	// end.
	TokenNow func() time.Time
	// StoreAround, when set, runs each operation of the store New opens
	// beneath its deadline (package deadline's Around): for tests that
	// freeze the store, or make it refuse writes, where its driver is.
	// Unused with Store.
	StoreAround deadline.Around
}

// New opens everything cfg names and builds the handler. The caller must
// Close the server.
func New(ctx context.Context, cfg Config, opt Options) (*Server, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The price file is read before the store is opened, so a bad one
	// stops serve before it changes anything.
	prices, err := spend.LoadPrices(cfg.Prices)
	if err != nil {
		return nil, fmt.Errorf("price file (--prices, BOXBROKER_PRICES): %w", err)
	}
	if prices, err = prices.WithUnpricedAs(cfg.UnpricedAs); err != nil {
		return nil, fmt.Errorf("--unpriced-as (BOXBROKER_UNPRICED_AS): %w", err)
	}
	// So is the TLS certificate: one that cannot be loaded stops serve
	// before it says it is listening.
	var cert *tls.Certificate
	if cfg.TLSCert != "" {
		c, err := loadKeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, err
		}
		cert = &c
	}
	log := opt.Logger
	flushLog := func() error { return nil }
	if log == nil {
		log, flushLog = NewLogger(os.Stderr, cfg.LogLevel)
	}
	// undo closes, newest first, what New has opened when it returns an
	// error; a Server returned closes them itself (Close).
	var undo []func() error
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			_ = undo[i]()
		}
	}()
	st := opt.Store
	// A SQLite store New opens itself is this process's alone: it holds
	// the data directory's lock before it reads or makes anything there,
	// and refuses a directory whose database has gone.
	var lock *dirLock
	if st == nil && !isPostgres(cfg.Store) {
		if lock, err = lockDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
		undo = append(undo, lock.release)
		if err := CheckHasDatabase(cfg.DataDir, cfg.NewStore); err != nil {
			return nil, err
		}
	} else if err := makeDataDir(cfg.DataDir); err != nil {
		// The journal, the spool and the audit sink's backlog are kept
		// there whatever the store.
		return nil, err
	}
	keyring, err := LoadKeyring(&cfg)
	if err != nil {
		return nil, err
	}
	if (st == nil && !isPostgres(cfg.Store)) || cfg.MasterKey == "" {
		warnOpenDataDir(log, cfg.DataDir)
	}
	// Every operation of the store's driver is bounded (package
	// deadline): by StoreDeadline unless its context says otherwise. A
	// store the caller gave is bounded as it was opened.
	bound := deadline.New(cfg.StoreDeadline, log)
	if st == nil {
		if st, err = openStore(ctx, &cfg, deadline.Chain(bound.Around, opt.StoreAround)); err != nil {
			return nil, err
		}
		undo = append(undo, st.Close) // a store the caller gave stays open
	}
	// The key check is a start's, not a request's: it has the longer
	// bound of the writes made beside requests, so that a store slow to
	// answer on a loaded machine does not fail the start with a deadline
	// in place of the check's verdict.
	if err := checkKeyring(deadline.Within(ctx, writeBound(cfg.StoreDeadline)), st, keyring); err != nil {
		return nil, err
	}
	transport := opt.Transport
	if transport == nil {
		transport = proxy.NewTransport(proxy.TransportOptions{ResponseHeaderTimeout: cfg.UpstreamHeaderTimeout})
	}
	// Every upstream call is timed and its status noted for the request's
	// log line, metrics and audit row.
	transport = proxy.Traced(transport, nil)
	tracing := opt.Tracing
	if tracing == nil {
		if tracing, err = telemetry.New(ctx, log); err != nil {
			return nil, err
		}
		undo = append(undo, func() error { return tracing.Shutdown(context.Background()) })
	}
	transport = tracing.Transport(transport) // upstream spans; rt itself when off
	m := metrics.New()
	// Only a SQLite store is known to be this process's alone; any other
	// may be shared with replicas, whose caches a report must wait for.
	lite, local := st.(*sqlite.Store)
	var fw *fileWatch
	// Every store call a request makes is bounded by StoreDeadline; the
	// writes made beside requests (audit batches, settlements, Run's
	// work) by a longer bound, which their contexts carry
	// (deadline.Within). Admin calls and the CLI are not bounded.
	if local {
		fw = &fileWatch{check: lite.CheckFile, log: log}
		// A group commit's writes, made one by one before it commits,
		// show the bound that the store works.
		lite.SetProgress(bound.Progress)
	}
	// The records of the calls answered wait in the outbox's journal
	// until the store or its spool, in the data directory, takes them;
	// what an earlier process left there goes to the spool now.
	// They name the store they belong to, and are replayed into no other.
	var ob *outbox.Outbox
	// The audit rows written through the outbox are streamed out too,
	// when a sink is configured (auditsink.go; nil: none).
	sink, err := openAuditSink(&cfg, m, log)
	if err != nil {
		return nil, err
	}
	undo = append(undo, sink.Close)
	id, err := st.Identity(deadline.Within(ctx, writeBound(cfg.StoreDeadline)))
	if err == nil {
		ob, err = outbox.Open(outbox.Config{Dir: cfg.DataDir, Store: sink.Wrap(st), Bound: writeBound(cfg.StoreDeadline), Identity: id, BatchEvery: outbox.DefaultBatchEvery, Metrics: m, Logger: log,
			Audit: outbox.AuditOptions{Retention: cfg.AuditRetention, Linger: auditLinger}})
	}
	if err != nil {
		return nil, err
	}
	undo = append(undo, ob.Close)
	m.DeadLetters(ob.Spool.DeadCount)
	aw := ob.Audit
	c := cache.New(st, cache.Options{Changes: st, Logger: log, Shared: !local})
	onGrant := func(outcome string) {
		m.Grant(outcome)
		if opt.OnGrant != nil {
			opt.OnGrant(outcome)
		}
	}
	credPool := pool.New(pool.Config{Cache: c, Keyring: keyring, Upstream: cfg.AnthropicURL, Transport: transport, Logger: log, Now: opt.PoolNow})
	m.Pool(poolStats(credPool))
	pay := &payer.Resolver{Cache: c, Keyring: keyring, Store: st, Logger: log, Now: opt.Now, OnGrant: onGrant, Pool: credPool}
	// Proposals are read and written straight through the store on the
	// refusal path (never cached), so every replica sees an approval on
	// its next request.
	hook, err := proposalWebhook(cfg, log)
	if err != nil {
		return nil, err
	}
	var notify func(store.Proposal)
	if hook != nil {
		undo = append(undo, hook.Close)
		notify = hook.Notify
	}
	approvals, err := approval.New(approval.Config{Store: st, MaxPending: cfg.ProposalMax, PendingFor: cfg.ProposalWait, PageURL: cfg.PageURL,
		Notify: notify, Now: opt.Now, Logger: log})
	if err != nil {
		return nil, err
	}
	eg, err := egress.New(egress.Config{Secrets: c, List: st, Keyring: keyring, Approvals: approvals, Transport: opt.Transport, Traced: tracing.Transport, MaxBody: cfg.EgressMaxBody, Logger: log,
		TransportOptions: proxy.TransportOptions{ResponseHeaderTimeout: cfg.UpstreamHeaderTimeout}, Mints: st, MintTransport: opt.MintTransport, Now: opt.Now, Audit: aw})
	if err != nil {
		return nil, err
	}
	// Each replica measures its clock's skew from PostgreSQL's, which
	// stamps and judges reservation leases.
	var storeClock func(context.Context) (time.Time, error)
	if pg, ok := st.(*postgres.Store); ok {
		storeClock = func(ctx context.Context) (time.Time, error) {
			ctx, cancel := context.WithTimeout(deadline.Within(ctx, writeBound(cfg.StoreDeadline)), writeBound(cfg.StoreDeadline))
			defer cancel()
			return pg.Clock(ctx)
		}
	}
	rates, err := ratelimit.New(ratelimit.Config{Store: st, Exchange: storeClock != nil, Now: opt.SpendNow, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := rates.Round(deadline.Within(ctx, writeBound(cfg.StoreDeadline))); err != nil {
		log.Warn("ratelimit: rate limits not read at start; none holds until they are", "err", err)
	}
	var alerter *spend.Alerter
	if len(cfg.BudgetAlerts) > 0 {
		alerter, err = spend.NewAlerter(spend.AlertConfig{Store: st, Thresholds: cfg.BudgetAlerts, Webhook: cfg.BudgetWebhook,
			WebhookKey: cfg.BudgetWebhookKey, Registerer: m.Registry(), Now: opt.SpendNow, Logger: log})
		if err != nil {
			return nil, err
		}
	}
	meter, err := spend.New(spend.Config{Store: st, Boxes: st, Outbox: ob, Approvals: approvals, RateLimiter: rates, Alerter: alerter,
		StaleAfter: cfg.ReservationLease, Budgeted: c.Budgeted, Prices: prices, Metrics: m, Now: opt.SpendNow, Logger: log, MaxTokens: cfg.ReserveMaxTokens, MaxBody: cfg.MaxBody,
		Counter: m, StoreClock: storeClock})
	if err != nil {
		return nil, err
	}
	if err := meter.MeasureClock(ctx); err != nil {
		log.Warn("spend: the store's clock not read at start; the clock's skew is not known until it is", "err", err)
	}
	// Cloud accounts' calls are translated beneath the meter: it reads
	// the Anthropic form of their answers.
	metered := meter.Transport(inference.CloudTransport(transport, log))
	caps := []capability.Capability{
		meter.Wrap(inference.New(inference.Config{Upstream: cfg.AnthropicURL, Transport: metered, CloudBeneath: true, MaxBody: cfg.MaxBody, MaxRetried: cfg.PoolRetryBody, Logger: log})),
		meter.Wrap(decide.New(decide.Config{Upstream: cfg.AnthropicURL, Transport: metered, Timeout: cfg.DecideTimeout, Logger: log})),
		eg,
		feedback.New(feedback.Config{Store: st, Keep: cfg.Feedback == FeedbackKeep, Metrics: m, Logger: log,
			Bound: store.FeedbackBound{Batches: cfg.FeedbackMaxBatches, Bytes: cfg.FeedbackMaxBytes}}),
	}
	if cfg.FountainURL != nil {
		caps = append(caps, fountain.New(fountain.Config{
			Upstream: cfg.FountainURL, Transport: transport, Resources: st, MaxBody: cfg.MaxBody, Logger: log, Audit: aw,
			Key: func(ctx context.Context) ([]byte, error) { return pay.Open(ctx, payer.SharedFountain) },
		}))
	}
	caps = append(caps, opt.Extra...)
	h, err := broker.New(broker.Config{
		Broker: cfg.Broker, Store: st, Cache: c, Payer: pay, Capabilities: caps, Logger: log,
		Limits:         broker.Limits{Rate: cfg.BoxRate, Burst: cfg.BoxBurst, Concurrent: max(cfg.BoxConcurrent, 0)},
		ReadTimeout:    cfg.ReadTimeout,
		Metrics:        m,
		Outbox:         ob,
		Tracing:        tracing,
		Recording:      recording(cfg, ob, fw),
		TrustedProxies: cfg.TrustedProxies,
		TokenNow:       opt.TokenNow,
	})
	if err != nil {
		return nil, err
	}
	srv := &Server{Config: cfg, Store: st, Cache: c, Keyring: keyring, Payer: pay, Meter: meter, Rates: rates, Alerter: alerter, Broker: h, Metrics: m, log: log, flushLog: flushLog, bound: bound, Outbox: ob, cert: cert, lock: lock, storeFile: fw, Approvals: approvals, webhook: hook}
	srv.Handler = srv.withReady(tracing.Handler(h)) // h itself when tracing is off
	srv.tracing, srv.sink = tracing, sink
	adm, err := admin.New(admin.Config{Store: sink.WrapAll(st), Cache: c, Keyring: keyring, Broker: cfg.Broker, Logger: log, Metrics: m.Handler(), Pool: credPool, Ready: srv.Ready,
		Hosts: cfg.adminHosts(), DeadLetters: ob, Prices: prices})
	if err != nil {
		return nil, err
	}
	page, err := ui.New(adm, ui.Config{DeadLetters: ob.Spool.DeadCount, SSO: cfg.SSO, Approvals: approvals})
	if err != nil {
		return nil, err
	}
	srv.Admin, srv.Page = adm, page
	undo = nil // the Server owns them now
	return srv, nil
}

// NewLogger returns a JSON logger on w at level: slog.JSONHandler's
// lines, buffered:
// each is written out at most LogFlushEvery later, and at once when it
// is at WARN or above. flush writes out what waits, as the process ends.
func NewLogger(w io.Writer, level string) (log *slog.Logger, flush func() error) {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	buf := newLogBuffer(w)
	return slog.New(flushingHandler{Handler: slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: l}), buf: buf}), buf.Flush
}

// RequestStore is the store as a request reaches it, every call bounded
// by StoreDeadline: for listeners beside the broker's own (the egress
// proxy) that read the store while serving a box.
func (s *Server) RequestStore() store.Store { return s.Store }

// Serve serves the box-facing handler on ln and, when admin is not nil,
// the admin handler on admin, and keeps the cache fresh until ctx ends;
// then it answers /readyz with 503, stops taking requests and lets
// in-flight ones finish for at most ShutdownGrace, or until StopNow.
func (s *Server) Serve(ctx context.Context, ln, admin net.Listener) error {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan struct{})
	go func() { s.Run(cctx); close(ran) }()
	go s.Meter.Run(deadline.Within(cctx, writeBound(s.Config.StoreDeadline))) // beside requests, as Run's
	defer func() {
		cancel()
		<-ran // the audit log's queue is written before Serve returns
	}()
	servers := []*http.Server{s.httpServer(cctx, s.tracked(s.Handler))}
	listeners := []net.Listener{ln}
	if admin != nil {
		// The admin API's store calls are not bounded: an operator's
		// report may take seconds.
		servers = append(servers, s.httpServer(deadline.Within(cctx, 0), s.Admin))
		listeners = append(listeners, admin)
	}
	if s.cert != nil {
		// The admin listener serves TLS with the same certificate, so
		// --admin-url can reach it over https.
		conf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*s.cert},
			NextProtos: []string{"h2", "http/1.1"}} // HTTP/2 for clients that offer it
		for i, hs := range servers {
			hs.TLSConfig = conf
			listeners[i] = tls.NewListener(listeners[i], conf)
		}
	}
	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() { errc <- hs.Serve(listeners[i]) }()
	}
	var first error
	select {
	case first = <-errc:
		// One listener failed: stop the other too.
	case <-ctx.Done():
	}
	errs := s.drain(servers)
	waiting := len(servers)
	if first != nil {
		waiting--
		if !errors.Is(first, http.ErrServerClosed) {
			errs = append(errs, first)
		}
	}
	for range waiting {
		if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			errs = append(errs, serr)
		}
	}
	return errors.Join(errs...)
}

// Run keeps the cache fresh, watches the SQLite database file (see
// fileWatch), prunes the change log, writes the audit log,
// writes out the broker's tallies of token refusals and settles model
// calls' spend in batches until ctx ends; then it writes what the tallies,
// the audit queue and the batch still hold and returns. Serve runs it; a
// caller serving the handlers itself runs it too.
func (s *Server) Run(ctx context.Context) {
	// Run's store calls are made beside requests: they take the longer
	// bound.
	ctx = deadline.Within(ctx, writeBound(s.Config.StoreDeadline))
	var wg sync.WaitGroup
	if s.Alerter != nil {
		wg.Go(func() { s.Alerter.Run(ctx) })
	}
	for _, run := range []func(context.Context){s.Rates.Run, s.sink.Run, s.Cache.Run, s.storeFile.Run,
		s.Outbox.RunReplay, s.pruneChanges, s.Outbox.RunBatches} {
		wg.Go(func() { run(ctx) })
	}
	// The audit log stops once the broker's last tallies are queued.
	actx, stopAudit := context.WithCancel(context.WithoutCancel(ctx))
	go func() { s.Broker.Run(ctx); stopAudit() }()
	s.Audit.Run(actx)
	wg.Wait()
}

// httpServer is an http.Server for h with the configured bounds: on
// reading a request's header, and its header and body together (the box-facing
// handler lifts the second once a body is read, so that a stream's
// answer is not cut off by it), on an idle connection, and on a
// header's size. No write timeout: an answer streams for as long as its
// upstream sends.
//
// On HTTP/2, ReadHeaderTimeout bounds nothing by itself: net/http reads
// a request's header block (HEADERS and its CONTINUATION frames) whole
// before the connection sees it, and a client that begins one and never
// ends it would hold its connection for IdleTimeout. A connection from
// which no frame has arrived for ReadHeaderTimeout is sent a PING and
// closed if no answer comes within ReadHeaderTimeout more; a client in
// the middle of a header block can send nothing but CONTINUATION, so its
// connection is closed within twice ReadHeaderTimeout. A client that
// answers keeps an idle connection until IdleTimeout, as on HTTP/1.
func (s *Server) httpServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.Config.ReadHeaderTimeout,
		ReadTimeout:       s.Config.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    s.Config.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: s.Config.ReadHeaderTimeout,
			PingTimeout:     s.Config.ReadHeaderTimeout,
		},
		ErrorLog:    log.New(netLog{s.log}, "", 0),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
}

// Close releases the store.
func (s *Server) Close() error {
	_ = s.flushLog()
	if s.webhook != nil {
		_ = s.webhook.Close()
	}
	return errors.Join(s.Outbox.Close(), s.Store.Close(), s.sink.Close(), s.lock.release(), s.tracing.Shutdown(context.Background()))
}

// poolStats reads the pool's entries for a metrics scrape, within a
// second; a scrape that cannot read them shows none.
func poolStats(p *pool.Pool) func() []metrics.PoolEntry {
	return func() []metrics.PoolEntry {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		stats, err := p.Health(ctx)
		if err != nil {
			return nil
		}
		out := make([]metrics.PoolEntry, len(stats))
		for i, s := range stats {
			out[i] = metrics.PoolEntry{Name: s.Name, PoolCounts: s.PoolCounts,
				Cooling: s.State == pool.StateCooling, Failed: s.State == pool.StateFailed}
		}
		return out
	}
}

// Logger is where the server logs (Options.Logger, or JSON on stderr at
// Config.LogLevel): what runs beside it, such as the egress proxy, logs
// there too, in the same form and at the same level.
func (s *Server) Logger() *slog.Logger { return s.log }
