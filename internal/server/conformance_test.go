package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// startBoxbroker starts the real boxbroker for the conformance suite: a
// fresh data directory, the suite's upstreams, a token per box, and the
// suite's credentials and secrets set the way an operator sets them.
func startBoxbroker(t *testing.T, dataDir string) func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
	return startWith(t, dataDir, startOptions{})
}

// startOptions change what startWith starts.
type startOptions struct {
	// wrap wraps the handler and transport replaces the upstream
	// transport, to make the deliberately broken brokers the suite must fail.
	wrap      func(http.Handler) http.Handler
	transport http.RoundTripper
	// extra are capabilities an operator adds in Go.
	extra []capability.Capability
}

// startWith is startBoxbroker changed by o.
func startWith(t *testing.T, dataDir string, o startOptions) func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
	return func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
		anthropic, err := url.Parse(env.Anthropic.URL)
		if err != nil {
			return nil, err
		}
		fountain, err := url.Parse(env.Fountain.URL)
		if err != nil {
			return nil, err
		}
		cfg := server.Config{Broker: env.Broker, DataDir: dataDir, AnthropicURL: anthropic, FountainURL: fountain, ShutdownGrace: time.Second,
			StoreDeadline: time.Second} // a loaded test machine's store can be slow without being down
		rctx, cancel := context.WithCancel(context.Background())
		srv, err := server.New(rctx, cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Transport: o.transport, Extra: o.extra})
		if err != nil {
			cancel()
			return nil, err
		}
		tokens, err := seedConformance(ctx, srv, env)
		if err != nil {
			cancel()
			return nil, err
		}
		go srv.Cache.Run(rctx)
		var h http.Handler = srv.Handler
		if o.wrap != nil {
			h = o.wrap(h)
		}
		// Served as serve serves boxes: net/http's server.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			cancel()
			return nil, err
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		return &conformance.Started{URL: "http://" + ln.Addr().String(), Tokens: tokens, Close: func() error {
			hs.Close()
			cancel()
			return srv.Close()
		}}, nil
	}
}

// servedCapabilities are the standard capabilities boxbroker serves, of
// the conformance suite's; decide belongs to inference.
var servedCapabilities = []string{protocol.Inference, protocol.Egress, protocol.Feedback, protocol.Fountain}

// seedConformance does on srv's store what an operator does for the
// suite's env: a token per box, the shared credentials and the boxes'
// secrets, sealed with srv's master key. It returns the tokens by box.
func seedConformance(ctx context.Context, srv *server.Server, env conformance.Env) (map[string]string, error) {
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
	for id, value := range map[string]string{payer.SharedAnthropic: env.Anthropic.Credential, payer.SharedFountain: env.Fountain.Credential} {
		sealed, err := srv.Keyring.Seal([]byte(value), payer.AD(id))
		if err != nil {
			return nil, err
		}
		if err := srv.Store.SetCredential(ctx, store.Credential{ID: id, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
			return nil, err
		}
	}
	for _, sec := range env.Secrets {
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

// TestConformance holds boxbroker to every check of the protocol's
// conformance table for the capabilities it serves.
func TestConformance(t *testing.T) {
	conformance.RunTest(t, conformance.Config{
		Name:         "boxbroker",
		Start:        startBoxbroker(t, t.TempDir()),
		Capabilities: servedCapabilities,
	})
}

// TestConformance_FailsBrokenBoxbrokers breaks boxbroker on purpose and
// shows the suite fails it on the checks that matter.
func TestConformance_FailsBrokenBoxbrokers(t *testing.T) {
	type tokenKey struct{}
	tests := []struct {
		name      string
		wrap      func(http.Handler) http.Handler
		transport http.RoundTripper
		mustFail  []string
	}{
		{
			name: "grants every scope",
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == protocol.RouteDeclaration {
						all := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent","decide"]},` +
							`{"name":"egress","broker":"lobby","scope":["CONFORMANCE","CONFORMANCE_UNHELD"]},` +
							`{"name":"feedback","broker":"lobby","scope":["agent","passive"]},` +
							`{"name":"fountain","broker":"lobby","scope":["agent","conversations","sandboxes","vault"]}]}`
						r.Body = io.NopCloser(strings.NewReader(all))
						r.ContentLength = int64(len(all))
					}
					next.ServeHTTP(w, r)
				})
			},
			mustFail: []string{"inference-agent-refused", "decide-refused", "egress-refused", "feedback-refused", "fountain-refused"},
		},
		{
			name: "forwards the token upstream",
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					token := r.Header.Get("X-Api-Key")
					if token == "" {
						token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
					}
					next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, token)))
				})
			},
			transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if tok, _ := r.Context().Value(tokenKey{}).(string); tok != "" {
					r.Header.Set("X-Box-Token", tok)
				}
				return http.DefaultTransport.RoundTrip(r)
			}),
			mustFail: []string{"inference-forwards", "egress-forwards", "fountain-forwards", "token-isolation"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report, err := conformance.Run(context.Background(), conformance.Config{
				Name:         "broken boxbroker: " + tt.name,
				Start:        startWith(t, t.TempDir(), startOptions{wrap: tt.wrap, transport: tt.transport}),
				Capabilities: servedCapabilities,
			})
			if err != nil {
				t.Fatal(err)
			}
			failed := map[string]bool{}
			for _, r := range report.Results {
				if r.Status == conformance.Failed {
					failed[r.ID] = true
				}
			}
			for _, id := range tt.mustFail {
				if !failed[id] {
					t.Errorf("the suite passed %s against a broker that %s", id, tt.name)
				}
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// calendar is a capability an operator adds in Go, as the specification's
// "Adding a capability" describes: its own prefix and scope words, and a
// handler. The broker applies the rule around it like any standard one.
type calendar struct{}

func (calendar) Name() string       { return "calendar" }
func (calendar) Prefixes() []string { return []string{"/calendar"} }

// Routes is its one route, in GET and POST.
func (calendar) Routes() []capability.Route {
	return []capability.Route{{Pattern: "/calendar/v1/events", Methods: capability.MethodGet | capability.MethodPost}}
}

func (calendar) Scopes(r *http.Request) (capability.Need, bool, error) {
	if r.URL.Path != "/calendar/v1/events" {
		return capability.Need{}, false, nil
	}
	switch r.Method {
	case http.MethodGet:
		return capability.Need{Words: []string{"read"}}, true, nil
	case http.MethodPost:
		return capability.Need{Words: []string{"write"}}, true, nil
	}
	return capability.Need{}, false, nil
}

func (calendar) Serve(w http.ResponseWriter, r *http.Request, c *capability.Call) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := io.WriteString(w, `{"box":"`+c.Box.Name+`","events":[]}`)
	return err
}

// TestConformance_OperatorCapability holds boxbroker to the rule for a
// capability added in Go, with a probe per scope word.
func TestConformance_OperatorCapability(t *testing.T) {
	conformance.RunTest(t, conformance.Config{
		Name:         "boxbroker with calendar",
		Start:        startWith(t, t.TempDir(), startOptions{extra: []capability.Capability{calendar{}}}),
		Capabilities: servedCapabilities,
		Extra: []conformance.Extra{{
			Name:   "calendar",
			Prefix: "/calendar",
			Probes: map[string]conformance.Probe{
				"read":  {Method: http.MethodGet, Path: "/calendar/v1/events"},
				"write": {Method: http.MethodPost, Path: "/calendar/v1/events", Body: []byte(`{"title":"standup"}`)},
			},
		}},
	})
}
