package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// servedCapabilities are the standard capabilities boxbroker serves, for
// the conformance suite run across replicas.
var servedCapabilities = []string{protocol.Inference}

// newMasterKey is a fresh master key, hex, as BOXBROKER_MASTER_KEY takes it.
func newMasterKey(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(k)
}

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
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
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
	for _, r := range replicas {
		u, _ := url.Parse(r.hs.URL)
		rr.proxies = append(rr.proxies, &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
			FlushInterval: -1,
		})
	}
	return rr
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := (rr.next.Add(1) - 1) % uint64(len(rr.proxies))
	rr.replicas[i].served.Add(1)
	rr.proxies[i].ServeHTTP(w, r)
}

// seedConformance does what an operator does for the suite's env, on st:
// a token per box, the shared credentials, sealed with keyring's key.
func seedConformance(ctx context.Context, srv *server.Server, env conformance.Env) (map[string]string, error) {
	tokens := map[string]string{}
	for _, name := range env.Boxes {
		token, err := broker.NewToken()
		if err != nil {
			return nil, err
		}
		if err := srv.Store.CreateBox(ctx, store.Box{Name: name, TokenHash: broker.HashToken(token), CreatedAt: time.Now(), PayerKind: protocol.PayerShared, Consent: true}); err != nil {
			return nil, err
		}
		tokens[name] = token
	}
	for id, value := range map[string]string{payer.SharedAnthropic: env.Anthropic.Credential, payer.SharedFountain: env.Fountain.Credential} {
		sealed, err := srv.Keyring.Seal([]byte(value), payer.AD(id))
		if err != nil {
			return nil, err
		}
		if err := srv.Store.SetCredential(ctx, store.Credential{ID: id, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// startReplicas returns a conformance Start that starts n replicas on the
// PostgreSQL store dsn, with one master key, behind a round robin whose
// URL it gives the suite. It stores what it started in *started.
func startReplicas(dsn string, n int, started *[]*replica) func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
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
				Broker: env.Broker, Store: dsn, MasterKey: hex.EncodeToString(k),
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
		Start:        startReplicas(dsn, 2, &rs),
		Capabilities: servedCapabilities,
	})
	for i, r := range rs {
		if n := r.served.Load(); n < 10 {
			t.Errorf("replica %d served %d requests of the suite, want many: the round robin did not alternate", i, n)
		}
	}
}
