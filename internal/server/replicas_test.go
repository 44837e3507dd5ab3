package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"

	// bbtoken: these tests call a box's token token.
	bbtoken "github.com/intentius/boxbroker/internal/token"
)

// replica is one boxbroker replica under test, served on a loopback port.
type replica struct {
	srv    *server.Server
	hs     *httptest.Server
	cancel context.CancelFunc
	// served counts the requests the round robin sent it.
	served atomic.Int64
}

// startReplica starts a boxbroker with cfg (opt.Store, when set, instead
// of the store cfg names) and keeps its cache fresh until close.
func startReplica(cfg server.Config, opt server.Options) (*replica, error) {
	if cfg.DataDir == "" {
		// The default is the operator's own data directory, where a
		// journal this replica left would be replayed into their store.
		return nil, errors.New("startReplica: cfg.DataDir is empty: give the replica a t.TempDir()")
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if cfg.StoreDeadline == 0 {
		// As in brokertest: a loaded test machine's PostgreSQL can take a
		// few hundred ms to answer without being down.
		cfg.StoreDeadline = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, opt)
	if err != nil {
		cancel()
		return nil, err
	}
	go srv.Cache.Run(ctx)
	return &replica{srv: srv, hs: httptest.NewServer(srv.Handler), cancel: cancel}, nil
}

// close stops the replica and closes its store.
func (r *replica) close() error {
	r.hs.Close()
	r.cancel()
	return r.srv.Close()
}

// roundRobin is a load balancer in front of replicas: each request goes to
// the next replica in turn.
type roundRobin struct {
	replicas []*replica
	proxies  []*httputil.ReverseProxy
	next     atomic.Uint64
}

func newRoundRobin(replicas []*replica) *roundRobin {
	rr := &roundRobin{replicas: replicas}
	// Its own transport: every httptest.Server.Close closes
	// http.DefaultTransport's idle connections.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	for _, r := range replicas {
		u, _ := url.Parse(r.hs.URL)
		rr.proxies = append(rr.proxies, &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
			FlushInterval: -1,
			Transport:     transport,
		})
	}
	return rr
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := (rr.next.Add(1) - 1) % uint64(len(rr.proxies))
	rr.replicas[i].served.Add(1)
	rr.proxies[i].ServeHTTP(w, r)
}

// startReplicas returns a conformance Start that starts n replicas on the
// PostgreSQL store dsn, with one master key and the data directory dir,
// behind a round robin whose URL it gives the suite. It stores what it
// started in *started.
func startReplicas(dsn, dir string, n int, started *[]*replica) func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
	return func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
		anthropic, err := url.Parse(env.Anthropic.URL)
		if err != nil {
			return nil, err
		}
		fountain, err := url.Parse(env.Fountain.URL)
		if err != nil {
			return nil, err
		}
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		var rs []*replica
		closeAll := func() error {
			var errs []error
			for _, r := range rs {
				errs = append(errs, r.close())
			}
			return errors.Join(errs...)
		}
		for range n {
			cfg := server.Config{
				Broker: env.Broker, Store: dsn, MasterKey: hex.EncodeToString(k), DataDir: dir,
				AnthropicURL: anthropic, FountainURL: fountain, ShutdownGrace: time.Second,
			}
			r, err := startReplica(cfg, server.Options{})
			if err != nil {
				closeAll()
				return nil, err
			}
			rs = append(rs, r)
		}
		// Seeded through one replica; the others read it from the store.
		tokens, err := seedConformance(ctx, rs[0].srv, env)
		if err != nil {
			closeAll()
			return nil, err
		}
		*started = rs
		lb := httptest.NewServer(newRoundRobin(rs))
		return &conformance.Started{URL: lb.URL, Tokens: tokens, Close: func() error {
			lb.Close()
			return closeAll()
		}}, nil
	}
}

// TestReplicas_Conformance runs the whole conformance suite against two
// replicas on one PostgreSQL, each request going to the other replica than
// the one before, so that every report is answered by one replica and the
// request judged by it by the other.
func TestReplicas_Conformance(t *testing.T) {
	dsn := postgrestest.Schema(t)
	var rs []*replica
	conformance.RunTest(t, conformance.Config{
		Name:         "boxbroker, two replicas",
		Start:        startReplicas(dsn, t.TempDir(), 2, &rs),
		Capabilities: servedCapabilities,
	})
	for i, r := range rs {
		if n := r.served.Load(); n < 10 {
			t.Errorf("replica %d served %d requests of the suite, want many: the round robin did not alternate", i, n)
		}
	}
}

// models asks for the model list with token, a request needing agent.
func models(b *brokertest.Broker, token string) brokertest.Response {
	return b.Do(http.MethodGet, "/llm/anthropic/v1/models", token, nil, nil)
}

// TestReplicas_ReportJudgedByTheOther: after a report answered 200 by
// replica A, the next request to replica B is judged by it, trial after
// trial, each report taking agent away or giving it back, while B holds
// the report before it in memory.
func TestReplicas_ReportJudgedByTheOther(t *testing.T) {
	a, b := brokertest.Replicas(t, brokertest.Options{})
	token := a.AddBox("box-1")
	a.SetCredential(payer.SharedAnthropic, "sk-ant-replicas")

	const trials = 50
	var late int
	var worst, reports time.Duration
	for i := range trials {
		allow := i%2 == 0
		words := []string{"decide"}
		if allow {
			words = []string{"agent"}
		}
		start := time.Now()
		a.Report(token, brokertest.Entry("inference", words...))
		reported := time.Now()
		reports += reported.Sub(start)
		for n := 0; ; n++ {
			sent := time.Now()
			resp := models(b, token)
			_, msg := brokertest.Refusal(resp.Body)
			judged := allow && resp.StatusCode == http.StatusOK ||
				!allow && resp.StatusCode == http.StatusForbidden && strings.Contains(msg, "agent")
			if judged {
				if n > 0 {
					late++
					worst = max(worst, sent.Sub(reported))
				}
				break
			}
			if sent.Sub(reported) > cache.DefaultMaxStale {
				t.Fatalf("trial %d: B answered %d %q %v after A took the report of %q, want it judged by that report: the bound is %v",
					i, resp.StatusCode, resp.Body, sent.Sub(reported), words, cache.DefaultMaxStale)
			}
		}
	}
	t.Logf("%d trials: B judged by an older report %d times after A's 200 (worst %v later); a report took %v on average",
		trials, late, worst, reports/trials)
	if late > 0 {
		t.Errorf("B judged a request by an older report after A answered 200 in %d of %d trials (worst %v after), want never", late, trials, worst)
	}
}

// TestReplicas_RotationTakesEffectOnTheOther rotates a box's token through
// the store, as boxbroker box rotate does, and measures how long each
// replica goes on taking the old token: never longer than MaxStale.
func TestReplicas_RotationTakesEffectOnTheOther(t *testing.T) {
	a, b := brokertest.Replicas(t, brokertest.Options{})
	ctx := t.Context()
	token := a.AddBox("box-1")
	a.SetCredential(payer.SharedAnthropic, "sk-ant-replicas")
	a.Report(token, brokertest.Entry("inference", "agent"))

	const trials = 50
	var windows []time.Duration
	for i := range trials {
		// Both replicas hold the box under the current token.
		for _, r := range []*brokertest.Broker{a, b} {
			if resp := models(r, token); resp.StatusCode != http.StatusOK {
				t.Fatalf("trial %d: the current token = %d %s, want 200", i, resp.StatusCode, resp.Body)
			}
		}
		next, err := bbtoken.NewBox()
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Server.Store.RotateToken(ctx, "box-1", bbtoken.Hash(next)); err != nil {
			t.Fatalf("RotateToken() = %v", err)
		}
		rotated := time.Now()
		for _, r := range []*brokertest.Broker{b, a} {
			for {
				sent := time.Now()
				resp := models(r, token)
				if resp.StatusCode == http.StatusForbidden {
					if _, msg := brokertest.Refusal(resp.Body); !strings.Contains(msg, "no box's token") {
						t.Fatalf("trial %d: the old token = 403 %q, want refused as no box's token", i, msg)
					}
					windows = append(windows, sent.Sub(rotated))
					break
				}
				if sent.Sub(rotated) > cache.DefaultMaxStale {
					t.Fatalf("trial %d: the old token = %d %v after the rotation, want 403: the bound is %v",
						i, resp.StatusCode, sent.Sub(rotated), cache.DefaultMaxStale)
				}
			}
		}
		token = next
	}
	slices.Sort(windows)
	t.Logf("%d rotations, two replicas each: the old token was refused by a request sent %v after the rotation at worst, %v at the median",
		trials, windows[len(windows)-1], windows[len(windows)/2])
}

// outage is a store whose every method a replica's hot path and cache
// calls fails with store.ErrUnavailable while down is set, as a
// PostgreSQL that cannot be reached does.
type outage struct {
	store.Store
	down atomic.Bool
}

func (o *outage) check(op string) error {
	if o.down.Load() {
		return fmt.Errorf("%s: %w: connection refused", op, store.ErrUnavailable)
	}
	return nil
}

func (o *outage) Ping(ctx context.Context) error {
	if err := o.check("ping"); err != nil {
		return err
	}
	return o.Store.Ping(ctx)
}

func (o *outage) Box(ctx context.Context, name string) (store.Box, error) {
	if err := o.check("box"); err != nil {
		return store.Box{}, err
	}
	return o.Store.Box(ctx, name)
}

func (o *outage) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	if err := o.check("box by token"); err != nil {
		return store.Box{}, err
	}
	return o.Store.BoxByTokenHash(ctx, hash)
}

func (o *outage) Declaration(ctx context.Context, box string) ([]byte, time.Time, error) {
	if err := o.check("declaration"); err != nil {
		return nil, time.Time{}, err
	}
	return o.Store.Declaration(ctx, box)
}

func (o *outage) DeclarationOfToken(ctx context.Context, box, tokenHash string) ([]byte, time.Time, error) {
	if err := o.check("declaration"); err != nil {
		return nil, time.Time{}, err
	}
	return o.Store.DeclarationOfToken(ctx, box, tokenHash)
}

func (o *outage) SaveDeclaration(ctx context.Context, box, tokenHash string, doc []byte, at time.Time) (store.KeptDeclaration, error) {
	if err := o.check("save declaration"); err != nil {
		return store.KeptDeclaration{}, err
	}
	return o.Store.SaveDeclaration(ctx, box, tokenHash, doc, at)
}

func (o *outage) Credential(ctx context.Context, id string) (store.Credential, error) {
	if err := o.check("credential"); err != nil {
		return store.Credential{}, err
	}
	return o.Store.Credential(ctx, id)
}

func (o *outage) Secret(ctx context.Context, box, name string) (store.Secret, error) {
	if err := o.check("secret"); err != nil {
		return store.Secret{}, err
	}
	return o.Store.Secret(ctx, box, name)
}

func (o *outage) SecretOfToken(ctx context.Context, box, tokenHash, name string) (store.Secret, error) {
	if err := o.check("secret"); err != nil {
		return store.Secret{}, err
	}
	return o.Store.SecretOfToken(ctx, box, tokenHash, name)
}

func (o *outage) GrantByHash(ctx context.Context, hash string) (store.Grant, error) {
	if err := o.check("grant"); err != nil {
		return store.Grant{}, err
	}
	return o.Store.GrantByHash(ctx, hash)
}

func (o *outage) ResourceOwner(ctx context.Context, kind, id string) (string, error) {
	if err := o.check("resource owner"); err != nil {
		return "", err
	}
	return o.Store.ResourceOwner(ctx, kind, id)
}

func (o *outage) ResourceOwnerOfToken(ctx context.Context, box, tokenHash, kind, id string) (string, error) {
	if err := o.check("resource owner"); err != nil {
		return "", err
	}
	return o.Store.ResourceOwnerOfToken(ctx, box, tokenHash, kind, id)
}

func (o *outage) AddFeedback(ctx context.Context, f store.FeedbackBatch, tokenHash string, bound store.FeedbackBound) (store.FeedbackAdded, error) {
	if err := o.check("add feedback"); err != nil {
		return store.FeedbackAdded{}, err
	}
	return o.Store.AddFeedback(ctx, f, tokenHash, bound)
}

func (o *outage) AddBoxResource(ctx context.Context, r store.Resource, tokenHash string) error {
	if err := o.check("add resource"); err != nil {
		return err
	}
	return o.Store.AddBoxResource(ctx, r, tokenHash)
}

func (o *outage) ChangesSince(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	if err := o.check("changes"); err != nil {
		return nil, err
	}
	return o.Store.ChangesSince(ctx, after, limit)
}

func (o *outage) LastChange(ctx context.Context) (int64, error) {
	if err := o.check("last change"); err != nil {
		return 0, err
	}
	return o.Store.LastChange(ctx)
}

// TestReplicas_FailClosedWhileTheStoreIsDown: while replica B cannot reach
// PostgreSQL, a request needing a lookup is a 503 refusal at once, what B
// holds in memory is served for no longer than MaxStale, and replica A,
// which can, goes on; when the store is back, B judges by what A wrote
// meanwhile, and nothing is lost.
func TestReplicas_FailClosedWhileTheStoreIsDown(t *testing.T) {
	dsn := postgrestest.Schema(t)
	key := brokertest.MasterKey(t)
	cfg := func(c *server.Config) {
		c.Store = dsn
		c.MasterKey = key
	}
	a := brokertest.New(t, brokertest.Options{Config: cfg})
	pg, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("postgres.Open() = %v", err)
	}
	down := &outage{Store: pg}
	b := brokertest.New(t, brokertest.Options{Config: cfg, Store: down})
	ctx := t.Context()

	token := a.AddBox("box-1")
	a.SetCredential(payer.SharedAnthropic, "sk-ant-replicas")
	a.Report(token, brokertest.Entry("inference", "agent"))
	// B holds the box, its report and the credential in memory.
	for range 2 {
		if resp := models(b, token); resp.StatusCode != http.StatusOK {
			t.Fatalf("models on B = %d %s, want 200", resp.StatusCode, resp.Body)
		}
	}

	down.down.Store(true)
	wentDown := time.Now()
	isUnavailable := func(what string, resp brokertest.Response) {
		t.Helper()
		typ, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || typ != protocol.TypeAPI || msg == "" {
			t.Errorf("%s on B with its store down = %d %s, want a 503 refusal", what, resp.StatusCode, resp.Body)
		}
		if strings.Contains(string(resp.Body), "connection refused") {
			t.Errorf("%s on B with its store down = %s, which shows the store's error", what, resp.Body)
		}
	}
	// What B does not hold needs the store: refused at once.
	stranger, err := bbtoken.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	isUnavailable("an unknown token", models(b, stranger))
	isUnavailable("a report", b.Do(http.MethodPost, protocol.RouteDeclaration, token,
		[]byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":[]}]}`), nil))

	// What B holds is served until MaxStale, and never after.
	var served int
	for {
		sent := time.Now()
		resp := models(b, token)
		if resp.StatusCode == http.StatusOK {
			if late := sent.Sub(wentDown); late > cache.DefaultMaxStale {
				t.Fatalf("B served from memory %v after its store went down, want at most %v", late, cache.DefaultMaxStale)
			}
			served++
			continue
		}
		isUnavailable("a request B held the answers to", resp)
		if sent.Sub(wentDown) > cache.DefaultMaxStale {
			break
		}
	}
	t.Logf("B served %d requests from memory after its store went down, then refused", served)

	// A still reaches the store: it takes agent away.
	a.Report(token, brokertest.Entry("inference", "decide"))
	if resp := models(a, token); resp.StatusCode != http.StatusForbidden {
		t.Errorf("models on A after its report without agent = %d, want 403", resp.StatusCode)
	}

	down.down.Store(false)
	// B's first request after the store is back is judged by A's report.
	resp := models(b, token)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "agent") {
		t.Errorf("models on B once its store is back = %d %s, want 403 naming agent: judged by the report A took meanwhile", resp.StatusCode, resp.Body)
	}
	a.Report(token, brokertest.Entry("inference", "agent"))
	if resp := models(b, token); resp.StatusCode != http.StatusOK {
		t.Errorf("models on B after A gave agent back = %d %s, want 200", resp.StatusCode, resp.Body)
	}

	// Nothing stored was lost.
	if box, err := pg.BoxByTokenHash(ctx, bbtoken.Hash(token)); err != nil || box.Name != "box-1" {
		t.Errorf("BoxByTokenHash() after the outage = %q, %v, want box-1", box.Name, err)
	}
	if doc, _, err := pg.Declaration(ctx, "box-1"); err != nil || !strings.Contains(string(doc), `"agent"`) {
		t.Errorf("Declaration(box-1) after the outage = %s, %v, want the last report, with agent", doc, err)
	}
	if _, err := pg.Credential(ctx, payer.SharedAnthropic); err != nil {
		t.Errorf("Credential(%s) after the outage = %v, want it kept", payer.SharedAnthropic, err)
	}
}

// TestReplicas_OtherMasterKeyRefused: a replica given another master key
// than the one the stored credentials were sealed with refuses to start,
// rather than fail every model call, and says which key to set, not the key.
// Its store deadline is far shorter than any PostgreSQL query: the key
// check at the start is not bounded by a request's deadline, which a
// loaded machine crossed (the start then failed with "no answer within
// the store deadline" in place of the key's words).
func TestReplicas_OtherMasterKeyRefused(t *testing.T) {
	dsn := postgrestest.Schema(t)
	cfg := func(key string) func(*server.Config) {
		return func(c *server.Config) {
			c.Store = dsn
			c.MasterKey = key
		}
	}
	a := brokertest.New(t, brokertest.Options{Config: cfg(brokertest.MasterKey(t))})
	a.SetCredential(payer.SharedAnthropic, "sk-ant-replicas")

	other := brokertest.MasterKey(t)
	c := server.Config{Store: dsn, MasterKey: other, DataDir: t.TempDir(), StoreDeadline: 20 * time.Microsecond}
	srv, err := server.New(t.Context(), c, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err == nil {
		srv.Close()
		t.Fatal("server.New() with another master key = nil error, want refused")
	}
	if !strings.Contains(err.Error(), "BOXBROKER_MASTER_KEY") || strings.Contains(err.Error(), other) {
		t.Errorf("server.New() with another master key = %q, want it to name BOXBROKER_MASTER_KEY and not hold the key", err)
	}
}

// TestReplicas_RebindTakesEffectOnTheOther binds a box's token elsewhere
// through the store, as boxbroker box bind does from another process,
// and back, and measures how long the other replica goes on judging by
// the binding before: never longer than MaxStale.
func TestReplicas_RebindTakesEffectOnTheOther(t *testing.T) {
	a, b := brokertest.Replicas(t, brokertest.Options{})
	ctx := t.Context()
	token := a.AddBox("box-1")
	a.SetCredential(payer.SharedAnthropic, "sk-ant-replicas")
	a.Report(token, brokertest.Entry("inference", "agent"))
	here := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	elsewhere := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	const trials = 20
	var worst time.Duration
	for i := range trials {
		for _, step := range []struct {
			from   []netip.Prefix
			status int
		}{{elsewhere, http.StatusForbidden}, {here, http.StatusOK}} {
			if err := a.Server.Store.BindBox(ctx, "box-1", step.from); err != nil {
				t.Fatalf("BindBox() = %v", err)
			}
			bound := time.Now()
			for {
				sent := time.Now()
				resp := models(b, token)
				if resp.StatusCode == step.status {
					worst = max(worst, sent.Sub(bound))
					break
				}
				if sent.Sub(bound) > cache.DefaultMaxStale {
					t.Fatalf("trial %d: bound to %v, the other replica answered %d %v after, want %d: the bound is %v",
						i, step.from, resp.StatusCode, sent.Sub(bound), step.status, cache.DefaultMaxStale)
				}
			}
		}
	}
	t.Logf("%d rebinds each way: the other replica judged by the new binding a request sent %v after it at worst", trials, worst)
}

// TestReplicas_GraceEndAndExpiryTakeEffectOnEveryReplica: a rotation's
// grace and a token's expiry end by the clock, not by a change: the
// request after the moment is refused on every replica, with no wait.
func TestReplicas_GraceEndAndExpiryTakeEffectOnEveryReplica(t *testing.T) {
	var clk clock
	a, b := brokertest.Replicas(t, brokertest.Options{ServerOptions: clk.options})
	ctx := t.Context()
	old := a.AddBox("box-1")
	a.SetCredential(payer.SharedAnthropic, "sk-ant-replicas")
	a.Report(old, brokertest.Entry("inference", "agent"))
	next, err := bbtoken.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	now := clk.now()
	rot := store.Rotation{Hash: bbtoken.Hash(next), TTL: 2 * time.Hour, ExpiresAt: now.Add(2 * time.Hour), GraceUntil: now.Add(time.Hour)}
	if err := a.Server.Store.ReplaceToken(ctx, "box-1", rot); err != nil {
		t.Fatal(err)
	}
	a.Sync()
	b.Sync()
	for _, r := range []*brokertest.Broker{a, b} {
		for _, tok := range []string{old, next} {
			if resp := models(r, tok); resp.StatusCode != http.StatusOK {
				t.Fatalf("during the grace: %d %s, want 200 for both tokens on both replicas", resp.StatusCode, resp.Body)
			}
		}
	}
	clk.advance(time.Hour)
	for _, r := range []*brokertest.Broker{b, a} {
		if resp := models(r, old); resp.StatusCode != http.StatusForbidden {
			t.Errorf("the old token the moment its grace ends = %d %s, want 403", resp.StatusCode, resp.Body)
		}
		if resp := models(r, next); resp.StatusCode != http.StatusOK {
			t.Errorf("the new token after the grace = %d %s, want 200", resp.StatusCode, resp.Body)
		}
	}
	clk.advance(time.Hour)
	for _, r := range []*brokertest.Broker{b, a} {
		if resp := models(r, next); resp.StatusCode != http.StatusForbidden {
			t.Errorf("the new token the moment it expires = %d %s, want 403", resp.StatusCode, resp.Body)
		}
	}
}
