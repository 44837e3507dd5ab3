package egressproxy_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestConformance_EgressThroughProxy runs the conformance suite's egress
// checks with every /egress/NAME/<path> request the suite makes sent the
// proxy's way instead: to the secret's host, through the HTTPS proxy
// (plain-HTTP absolute form, the suite's echo host being http), with the
// box's token in Proxy-Authorization. The suite then judges what reached
// the host and what came back exactly as it judges the base-URL way
// (internal/server's TestConformance). Only egress-bad-name, a check of
// the /egress route's names, which a proxy request has no form for, goes
// to the broker's /egress route as it is; so do the suite's requests to
// other routes.
func TestConformance_EgressThroughProxy(t *testing.T) {
	var proxied atomic.Int64
	conformance.RunTest(t, conformance.Config{
		Name:         "boxbroker through its HTTPS proxy",
		Start:        startThroughProxy(t, &proxied),
		Capabilities: []string{protocol.Egress},
	})
	if proxied.Load() == 0 {
		t.Errorf("no request of the suite went through the proxy")
	}
}

func startThroughProxy(t *testing.T, proxied *atomic.Int64) func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
	return func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
		anthropic, _ := url.Parse(env.Anthropic.URL)
		cfg := server.Config{Broker: env.Broker, DataDir: t.TempDir(), AnthropicURL: anthropic, ShutdownGrace: time.Second}
		rctx, cancel := context.WithCancel(context.Background())
		srv, err := server.New(rctx, cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			cancel()
			return nil, err
		}
		stop := func() error { cancel(); return srv.Close() }
		tokens, err := seed(ctx, srv, env)
		if err != nil {
			stop()
			return nil, err
		}
		go srv.Cache.Run(rctx)
		ca, err := proxyca.Load(ctx, srv.Store, srv.Keyring, nil)
		if err != nil {
			stop()
			return nil, err
		}
		p, err := egressproxy.New(egressproxy.Config{Broker: srv.Broker, BrokerWord: srv.Config.Broker, Cache: srv.Cache, Secrets: srv.Store, CA: ca})
		if err != nil {
			stop()
			return nil, err
		}
		pln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, err
		}
		pdone := make(chan struct{})
		go func() { p.Serve(rctx, pln); close(pdone) }()
		hosts := map[string]string{}
		for _, s := range env.Secrets {
			hosts[s.Name] = s.Host
		}
		front := &proxyFront{proxied: proxied, broker: srv.Handler, proxy: "http://" + pln.Addr().String(), hosts: hosts, anyHost: env.Secrets[0].Host}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, err
		}
		hs := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		return &conformance.Started{URL: "http://" + ln.Addr().String(), Tokens: tokens, Close: func() error {
			hs.Close()
			err := stop()
			<-pdone
			return err
		}}, nil
	}
}

// proxyFront turns the suite's /egress/NAME/<path> requests into
// requests to NAME's host through the proxy, with the bearer token as
// the proxy password, and passes everything else to the broker.
type proxyFront struct {
	proxied *atomic.Int64 // requests sent through the proxy
	broker  http.Handler
	proxy   string
	// hosts are the secrets' hosts by name; a name with none (a secret
	// the broker does not hold) is sent to anyHost, as a box would try.
	hosts   map[string]string
	anyHost string
}

func (f *proxyFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), protocol.PrefixEgress+"/")
	name, tail, _ := strings.Cut(rest, "/")
	if !ok || !protocol.IsSecretName(name) {
		f.broker.ServeHTTP(w, r)
		return
	}
	f.proxied.Add(1)
	host := f.hosts[name]
	if host == "" {
		host = f.anyHost
	}
	pu, _ := url.Parse(f.proxy)
	if tok := token.Bearer(r.Header); tok != "" {
		pu.User = url.UserPassword("box", tok)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(pu)}
	defer tr.CloseIdleConnections()
	target := strings.TrimSuffix(host, "/") + "/" + tail
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// seed does on srv's store what an operator does for the suite's env.
func seed(ctx context.Context, srv *server.Server, env conformance.Env) (map[string]string, error) {
	tokens := map[string]string{}
	for _, name := range env.Boxes {
		tok, err := token.NewBox()
		if err != nil {
			return nil, err
		}
		if err := srv.Store.CreateBox(ctx, store.Box{Name: name, TokenHash: token.Hash(tok), CreatedAt: time.Now(), PayerKind: protocol.PayerShared, Consent: true}); err != nil {
			return nil, err
		}
		tokens[name] = tok
	}
	sealed, err := srv.Keyring.Seal([]byte(env.Anthropic.Credential), payer.AD(payer.SharedAnthropic))
	if err != nil {
		return nil, err
	}
	if err := srv.Store.SetCredential(ctx, store.Credential{ID: payer.SharedAnthropic, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		return nil, err
	}
	// The box that never reports holds conformance-a's secrets too: a
	// proxy request names no secret, only a host, and the proxy judges
	// the rule for the secret pinned there. With one pinned, its refusal
	// of that box is the rule's, naming egress and the secret, as
	// unreported-refused requires; with none it would be refused for the
	// host alone, whatever the rule said.
	var held []conformance.Secret
	for _, sec := range env.Secrets {
		held = append(held, sec)
		if sec.Box == conformance.BoxReporting {
			sec.Box = conformance.BoxSilent
			held = append(held, sec)
		}
	}
	for _, sec := range held {
		sealed, err := srv.Keyring.Seal([]byte(sec.Value), secrets.SecretAD(sec.Box, sec.Name))
		if err != nil {
			return nil, err
		}
		if err := srv.Store.SetSecret(ctx, store.Secret{Box: sec.Box, Name: sec.Name, Host: sec.Host, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}
