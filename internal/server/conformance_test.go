package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// startBoxbroker starts the real boxbroker for the conformance suite: a
// fresh data directory, the suite's upstreams, a token per box, and the
// suite's credentials and secrets set the way an operator sets them.
func startBoxbroker(t *testing.T, dataDir string) func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
	return func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
		anthropic, err := url.Parse(env.Anthropic.URL)
		if err != nil {
			return nil, err
		}
		fountain, err := url.Parse(env.Fountain.URL)
		if err != nil {
			return nil, err
		}
		cfg := server.Config{Broker: env.Broker, DataDir: dataDir, AnthropicURL: anthropic, FountainURL: fountain, ShutdownGrace: time.Second}
		rctx, cancel := context.WithCancel(context.Background())
		srv, err := server.New(rctx, cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			cancel()
			return nil, err
		}
		tokens := map[string]string{}
		for _, name := range env.Boxes {
			token, err := broker.NewToken()
			if err != nil {
				cancel()
				return nil, err
			}
			if err := srv.Store.CreateBox(ctx, store.Box{Name: name, TokenHash: broker.HashToken(token), CreatedAt: time.Now(), PayerKind: protocol.PayerShared, Consent: true}); err != nil {
				cancel()
				return nil, err
			}
			tokens[name] = token
		}
		for id, value := range map[string]string{payer.SharedAnthropic: env.Anthropic.Credential, payer.SharedFountain: env.Fountain.Credential} {
			sealed, err := srv.Keyring.Seal([]byte(value), payer.AD(id))
			if err != nil {
				cancel()
				return nil, err
			}
			if err := srv.Store.SetCredential(ctx, store.Credential{ID: id, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
				cancel()
				return nil, err
			}
		}
		go srv.Cache.Run(rctx)
		hs := httptest.NewServer(srv.Handler)
		return &conformance.Started{URL: hs.URL, Tokens: tokens, Close: func() error {
			hs.Close()
			cancel()
			return srv.Close()
		}}, nil
	}
}

// TestConformance holds boxbroker to every check of the protocol's
// conformance table for the capabilities it serves.
func TestConformance(t *testing.T) {
	conformance.RunTest(t, conformance.Config{
		Name:         "boxbroker",
		Start:        startBoxbroker(t, t.TempDir()),
		Capabilities: []string{protocol.Inference},
	})
}
