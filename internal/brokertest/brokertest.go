// Package brokertest starts a whole boxbroker for tests: the real server
// on a temporary SQLite store and data directory, served by httptest on
// loopback, with a recording stand-in for the Anthropic API.
package brokertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// Options tune New.
type Options struct {
	// Broker is the broker word (default "lobby").
	Broker string
	// Anthropic, when set, is the upstream handler instead of the recording stand-in.
	Anthropic http.Handler
	// Config is applied before the server starts; fields it leaves zero keep the test defaults.
	Config func(*server.Config)
	// Extra capabilities to serve.
	Extra []capability.Capability
	// Logs, when set, receives the server's logs at debug level.
	Logs io.Writer
	// Fountain, when true, starts a recording Fountain stand-in
	// (Broker.Fountain, answering with FountainStandIn) and points the
	// server's FountainURL at it, so /fountain is served.
	Fountain bool
	// FountainHandler, when set, answers as Fountain instead of the
	// stand-in (recorded all the same); it implies Fountain.
	FountainHandler http.Handler
	// Store, when set, is the store instead of the one the Config names;
	// the Broker closes it when the test ends.
	Store store.Store
	// ServerOptions, when set, adjusts the server's Options (its clock,
	// its grant hook) before it starts.
	ServerOptions func(*server.Options)
}

// Broker is a running boxbroker under test.
type Broker struct {
	t      testing.TB
	URL    string
	Server *server.Server
	// Upstream is the recording Anthropic stand-in (nil when Options.Anthropic was set).
	Upstream *Recorder
	// Fountain records what reached Fountain (nil unless Options.Fountain
	// or Options.FountainHandler was set).
	Fountain *Recorder
	// Front records every request the broker itself received, without
	// bodies (HeadersOnly, so that streaming and size bounds behave as
	// without it), so a test can count a client's attempts (retries
	// included).
	Front *Recorder
	// Client is the client Do uses: its own transport, not
	// http.DefaultTransport, whose idle connections every
	// httptest.Server.Close closes under other tests' feet.
	Client *http.Client
	// AdminURL is the admin listener's base URL, and AdminToken an admin
	// token minted for the test.
	AdminURL   string
	AdminToken string
}

// New starts a boxbroker and registers its shutdown with t.Cleanup.
func New(t testing.TB, opt Options) *Broker {
	t.Helper()
	b := &Broker{t: t, Client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	up := opt.Anthropic
	if up == nil {
		b.Upstream = &Recorder{Handler: http.HandlerFunc(AnthropicStandIn)}
		up = b.Upstream
	}
	ups := httptest.NewServer(up)
	t.Cleanup(ups.Close)
	u, _ := url.Parse(ups.URL)
	// The store deadline is a second, not serve's 250 ms: the suite runs
	// on a loaded machine, where a store that answers can take a few
	// hundred ms; the fault tests set their own.
	cfg := server.Config{Broker: opt.Broker, DataDir: t.TempDir(), AnthropicURL: u, ShutdownGrace: time.Second, LogLevel: "debug",
		StoreDeadline: time.Second}
	if opt.Fountain || opt.FountainHandler != nil {
		h := opt.FountainHandler
		if h == nil {
			h = http.HandlerFunc(FountainStandIn)
		}
		b.Fountain = &Recorder{Handler: h}
		fs := httptest.NewServer(b.Fountain)
		t.Cleanup(fs.Close)
		cfg.FountainURL, _ = url.Parse(fs.URL)
	}
	if opt.Config != nil {
		opt.Config(&cfg)
	}
	logs := opt.Logs
	if logs == nil {
		logs = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	sopt := server.Options{
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Extra:  opt.Extra,
		Store:  opt.Store,
	}
	if opt.ServerOptions != nil {
		opt.ServerOptions(&sopt)
	}
	srv, err := server.New(ctx, cfg, sopt)
	if err != nil {
		cancel()
		t.Fatalf("server.New: %v", err)
	}
	ran := make(chan struct{})
	go func() { srv.Run(ctx); close(ran) }()
	b.Front = &Recorder{Handler: srv.Handler, HeadersOnly: true}
	// Boxes reach it as they reach serve: through net/http's server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("listen: %v", err)
	}
	hs := &http.Server{Handler: b.Front, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	go hs.Serve(ln)
	as := httptest.NewServer(srv.Admin)
	t.Cleanup(func() {
		hs.Close()
		as.Close()
		cancel()
		<-ran // the audit queue is written before the store closes
		srv.Close()
	})
	b.URL = "http://" + ln.Addr().String()
	b.AdminURL = as.URL
	if b.AdminToken, _, err = operator.MintRole(ctx, srv.Store, "brokertest", store.AdminOperator, time.Now()); err != nil {
		t.Fatalf("operator.Mint: %v", err)
	}
	b.Server = srv
	// Wait for the cache's first poll, so reads come from memory as in production.
	for i := 0; i < 200; i++ {
		if err := srv.Cache.Poll(ctx); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return b
}

// AddBox enrols a box and returns its token.
func (b *Broker) AddBox(name string) string {
	b.t.Helper()
	tok, err := token.NewBox()
	if err != nil {
		b.t.Fatal(err)
	}
	err = b.Server.Store.CreateBox(context.Background(), store.Box{Name: name, TokenHash: token.Hash(tok), CreatedAt: time.Now(), PayerKind: protocol.PayerShared})
	if err != nil {
		b.t.Fatalf("CreateBox(%s): %v", name, err)
	}
	return tok
}

// SetCredential seals and stores a credential by ID ("anthropic", "fountain", "owner:<box>", ...).
func (b *Broker) SetCredential(id, value string) {
	b.t.Helper()
	sealed, err := b.Server.Keyring.Seal([]byte(value), payer.AD(id))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := b.Server.Store.SetCredential(context.Background(), store.Credential{ID: id, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		b.t.Fatal(err)
	}
	b.Server.Cache.Drop(store.ChangeCredential, id)
}

// SetSecret seals and stores the egress secret name of box, to be sent
// only to host (a base URL), and drops it from the cache. bodyFields,
// when given, are the body fields it names (store.Secret.BodyFields).
func (b *Broker) SetSecret(box, name, host, value string, bodyFields ...string) {
	b.t.Helper()
	b.putSecret(store.Secret{Box: box, Name: name, Host: host, BodyFields: bodyFields}, []byte(value))
	b.Server.Cache.Drop(store.ChangeSecret, box+"/"+name)
}

// putSecret seals value as the secret sec.Box/sec.Name, stores sec with
// it (updated now), and returns it sealed.
func (b *Broker) putSecret(sec store.Secret, value []byte) []byte {
	b.t.Helper()
	var err error
	if sec.Sealed, err = b.Server.Keyring.Seal(value, secrets.SecretAD(sec.Box, sec.Name)); err != nil {
		b.t.Fatal(err)
	}
	sec.UpdatedAt = time.Now()
	if err := b.Server.Store.SetSecret(context.Background(), sec); err != nil {
		b.t.Fatalf("SetSecret(%s, %s): %v", sec.Box, sec.Name, err)
	}
	return sec.Sealed
}

// SetSecretRules gives the secret name of box (already set) rules and
// a rate (store.Secret.Rules and Rate), and drops it from the cache.
func (b *Broker) SetSecretRules(box, name string, rules []string, rate string) {
	b.t.Helper()
	ctx := context.Background()
	sec, err := b.Server.Store.Secret(ctx, box, name)
	if err != nil {
		b.t.Fatalf("Secret(%s, %s): %v", box, name, err)
	}
	sec.Rules, sec.Rate = rules, rate
	if err := b.Server.Store.SetSecret(ctx, sec); err != nil {
		b.t.Fatalf("SetSecret(%s, %s): %v", box, name, err)
	}
	b.Server.Cache.Drop(store.ChangeSecret, box+"/"+name)
}

// SetRefusedOAuthGrant stores an oauth2 secret NAME of box, at
// https://api.example.com, whose grant the token endpoint has refused
// (its mint state says so), as a page or a listing shows it. It returns
// the configuration's client secret and refresh token, which nothing
// shown may repeat.
func (b *Broker) SetRefusedOAuthGrant(box, name string) (clientSecret, refreshToken string) {
	b.t.Helper()
	clientSecret, refreshToken = "cs_ADMINTESTCLIENTSECRET", "rt_ADMINTESTREFRESH"
	cfg := []byte(`{"token_url":"https://auth.example.com/token","client_id":"c","client_secret":"` + clientSecret + `","refresh_token":"` + refreshToken + `"}`)
	sealed := b.putSecret(store.Secret{Box: box, Name: name, Host: "https://api.example.com", Kind: mint.KindOAuth2}, cfg)
	if err := b.Server.Store.SetMintState(context.Background(), store.MintState{Box: box, Name: name, Of: mint.Of(sealed),
		Failure: "oauth2: the token endpoint refused (400 invalid_grant)", UpdatedAt: time.Now()}); err != nil {
		b.t.Fatalf("SetMintState(%s, %s): %v", box, name, err)
	}
	return clientSecret, refreshToken
}

// Sync applies every change the store has logged to the server's cache,
// as the server's own poll does every few milliseconds: after Sync, a
// write made straight to the store (as the CLI makes them) is what the
// next request sees.
func (b *Broker) Sync() {
	b.t.Helper()
	if err := b.Server.Cache.Poll(context.Background()); err != nil {
		b.t.Fatalf("cache poll: %v", err)
	}
}

// Report posts a declaration report for token with the given entries and
// fails the test unless it is answered 200.
func (b *Broker) Report(token string, caps ...protocol.Capability) protocol.Kept {
	b.t.Helper()
	if caps == nil {
		caps = []protocol.Capability{}
	}
	body, _ := json.Marshal(map[string]any{"capabilities": caps})
	resp := b.Do("POST", protocol.RouteDeclaration, token, body, nil)
	if resp.StatusCode != 200 {
		b.t.Fatalf("report: %d %s", resp.StatusCode, resp.Body)
	}
	var kept protocol.Kept
	if err := json.Unmarshal(resp.Body, &kept); err != nil {
		b.t.Fatal(err)
	}
	return kept
}

// Entry is a capability entry naming the broker "lobby".
func Entry(name string, words ...string) protocol.Capability {
	if words == nil {
		words = []string{}
	}
	return protocol.Capability{Name: name, Broker: "lobby", Scope: words}
}

// Response is a whole answer, read.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Do sends a request with token as the bearer (none when empty) and reads the answer.
func (b *Broker) Do(method, path, token string, body []byte, header http.Header) Response {
	b.t.Helper()
	return b.send(b.URL, method, path, token, bytes.NewReader(body), header)
}

// Admin sends a request to the admin listener with token as the bearer
// (none when empty) and body as JSON (none when nil), and reads the answer.
func (b *Broker) Admin(method, path, token string, body any) Response {
	b.t.Helper()
	if body == nil {
		return b.send(b.AdminURL, method, path, token, nil, nil)
	}
	j, err := json.Marshal(body)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.send(b.AdminURL, method, path, token, bytes.NewReader(j), http.Header{"Content-Type": {"application/json"}})
}

// send sends a request to base+path with header, and token as the
// bearer unless header carries an Authorization or an X-Api-Key, with
// b.Client, and reads the answer; it fails the test (naming the method
// and path) when it cannot.
func (b *Broker) send(base, method, path, token string, body io.Reader, header http.Header) Response {
	b.t.Helper()
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if token != "" && req.Header.Get("Authorization") == "" && req.Header.Get("X-Api-Key") == "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.Client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: rb}
}

// Refusal decodes a refusal body's type and message, or "" for both if
// it is not one. It is stricter than protocol.ReadRefusal, which reads a
// message alone or a field of the wrong kind as other brokers may write
// them: a test holds the broker to the protocol's exact shape, a
// "type":"error" and an error object with string fields.
func Refusal(body []byte) (typ, message string) {
	var r protocol.Refusal
	if json.Unmarshal(body, &r) != nil || r.Type != "error" {
		return "", ""
	}
	return r.Error.Type, r.Error.Message
}

// Seen is one request an upstream received.
type Seen = upstreamtest.Seen

// Recorder records every request before its Handler answers it.
type Recorder = upstreamtest.Recorder

// AnthropicStandIn answers Messages (JSON, or SSE when "stream": true),
// count_tokens and models like the Anthropic API, for any credential. A
// Messages request asking for structured output is answered from its
// schema (answerStructured).
func AnthropicStandIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/messages":
		body, _ := io.ReadAll(r.Body)
		req, structured := asStructured(body)
		if structured {
			answerStructured(w, r, req)
			return
		}
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range SSEEvents(req.Model, "Hello from the stand-in.") {
				_, _ = io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			}
			return
		}
		_, _ = io.WriteString(w, upstreamtest.Message(req.Model, "Hello from the stand-in."))
	case r.Method == "POST" && r.URL.Path == "/v1/messages/count_tokens":
		_, _ = io.WriteString(w, `{"input_tokens":12}`)
	case r.Method == "GET" && r.URL.Path == "/v1/models":
		_, _ = io.WriteString(w, `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-sonnet-4-5"}`)
	case r.Method == "GET" && len(r.URL.Path) > len("/v1/models/"):
		id, _ := json.Marshal(r.URL.Path[len("/v1/models/"):])
		_, _ = io.WriteString(w, `{"type":"model","id":`+string(id)+`,"display_name":"Stand-in","created_at":"2025-09-29T00:00:00Z"}`)
	default:
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"not_found_error","message":"Not found."}}`)
	}
}

// FountainStandIn answers like Fountain's API under /api/: POST
// /api/conversations starts a conversation and answers 201 with a fresh
// id; any other request under /api/ answers 200 with its method, path and
// query. A request with no bearer is a 401.
func FountainStandIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	a := r.Header.Get("Authorization")
	if len(a) < 8 || a[:7] != "Bearer " {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"unauthorized"}`)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/conversations":
		id := make([]byte, 8)
		_, _ = rand.Read(id)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"conv_`+hex.EncodeToString(id)+`","status":"started"}`)
	case len(r.URL.Path) > len("/api/") && r.URL.Path[:len("/api/")] == "/api/":
		b, _ := json.Marshal(map[string]string{"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery})
		_, _ = w.Write(b)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"not found"}`)
	}
}

// SSEEvents is a Messages stream as the Anthropic API sends it
// (upstreamtest.SSEEvents).
func SSEEvents(model, text string) []string { return upstreamtest.SSEEvents(model, text) }
