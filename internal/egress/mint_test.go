package egress_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite/sqlitetest"
)

// issued is the set of tokens a stand-in token endpoint issued and has
// not revoked, shared with the stand-in host that takes them.
type issued struct {
	mu     sync.Mutex // guards tokens
	tokens map[string]bool
	n      atomic.Int64 // mints made
}

func (is *issued) issue(prefix string) string {
	v := prefix + randomHex(20)
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.tokens == nil {
		is.tokens = map[string]bool{}
	}
	is.tokens[v] = true
	is.n.Add(1)
	return v
}

func (is *issued) valid(v string) bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.tokens[v]
}

func (is *issued) revokeAll() {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.tokens = nil
}

func (is *issued) all() []string {
	is.mu.Lock()
	defer is.mu.Unlock()
	var out []string
	for v := range is.tokens {
		out = append(out, v)
	}
	return out
}

// mintEnv is a broker with one box, a stand-in token endpoint (TLS), and
// a stand-in host that takes only tokens the endpoint issued and echoes
// the Authorization it received, in a header and in the body.
type mintEnv struct {
	br     *brokertest.Broker
	token  string
	clock  *clocktest.Clock
	issued *issued
	host   *host
	mintAt *httptest.Server
	names  []string // the secrets set, all declared
	// minted records every request the token endpoint received.
	mu     sync.Mutex // guards minted
	minted []seen
}

func newMintEnv(t *testing.T, endpoint http.HandlerFunc) *mintEnv {
	t.Helper()
	return newMintEnvHost(t, endpoint, nil)
}

// newMintEnvHost is newMintEnv with hostHandler, when not nil, as the host.
func newMintEnvHost(t *testing.T, endpoint, hostHandler http.HandlerFunc) *mintEnv {
	t.Helper()
	return newMintEnvLogs(t, endpoint, hostHandler, nil)
}

// newMintEnvLogs is newMintEnvHost with the server's logs written to
// logs, when not nil.
func newMintEnvLogs(t *testing.T, endpoint, hostHandler http.HandlerFunc, logs io.Writer) *mintEnv {
	t.Helper()
	return newMintEnvWith(t, endpoint, hostHandler, brokertest.Options{Logs: logs})
}

// newMintEnvWith is newMintEnvHost with the broker's options opt (its
// ServerOptions set here).
func newMintEnvWith(t *testing.T, endpoint, hostHandler http.HandlerFunc, opt brokertest.Options) *mintEnv {
	t.Helper()
	e := &mintEnv{clock: clocktest.New(time.Now().UTC().Truncate(time.Second)), issued: &issued{}}
	e.host = newHost(t, func(w http.ResponseWriter, r *http.Request) {
		if hostHandler != nil {
			hostHandler(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo-Authorization", auth)
		if !e.issued.valid(strings.TrimPrefix(auth, "Bearer ")) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "bad credentials: %s", auth)
			return
		}
		fmt.Fprintf(w, `{"you sent":%q}`, auth)
	})
	e.mintAt = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{Method: r.Method, Host: r.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
		e.mu.Lock()
		e.minted = append(e.minted, s)
		e.mu.Unlock()
		endpoint(w, r)
	}))
	t.Cleanup(e.mintAt.Close)
	opt.ServerOptions = func(o *server.Options) {
		o.MintTransport = e.mintAt.Client().Transport
		o.Now = e.clock.Now
	}
	e.br = brokertest.New(t, opt)
	e.token = e.br.AddBox("shop")
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, s := range append(e.minted, e.host.Seen()...) {
			if strings.Contains(s.dump(), e.token) {
				t.Errorf("a stand-in received the box's token: %s", s.dump())
			}
		}
	})
	return e
}

// set saves the secret NAME of kind with config, as `secret set` does.
func (e *mintEnv) set(t *testing.T, name, kind string, config any) {
	t.Helper()
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mint.Parse(kind, raw); err != nil {
		t.Fatalf("mint.Parse(%s) = %v", kind, err)
	}
	s := e.br.Server
	sealed, err := s.Keyring.Seal(raw, secrets.SecretAD("shop", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.SetSecret(t.Context(), store.Secret{Box: "shop", Name: name, Host: e.host.URL, Sealed: sealed, UpdatedAt: time.Now(), Kind: kind}); err != nil {
		t.Fatal(err)
	}
	s.Cache.Drop(store.ChangeSecret, "shop/"+name)
	e.names = append(e.names, name)
	e.br.Report(e.token, brokertest.Entry(protocol.Egress, e.names...))
}

// call sends the box's request and checks that no token the endpoint
// issued comes back to it, in the answer's headers or body.
func (e *mintEnv) call(t *testing.T, name string) (int, string) {
	t.Helper()
	resp := e.br.Do(http.MethodGet, "/egress/"+name+"/repos/o/r", e.token, nil, nil)
	all := fmt.Sprint(resp.Header) + string(resp.Body)
	e.issued.mu.Lock()
	defer e.issued.mu.Unlock()
	for v := range e.issued.tokens {
		if strings.Contains(all, v) {
			t.Errorf("the box's answer holds a minted token: %s", all)
		}
	}
	return resp.StatusCode, string(resp.Body)
}

func testKey(t *testing.T) (*rsa.PrivateKey, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return key, string(p)
}

// githubStandIn is GitHub's access_tokens endpoint: it checks the JWT's
// RS256 signature against the app's public key, its issuer and its
// expiry (by the test clock), and issues installation tokens that expire
// in an hour.
func githubStandIn(t *testing.T, e **mintEnv, pub *rsa.PublicKey, refuse *atomic.Bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env := *e
		if r.Method != http.MethodPost || r.URL.Path != "/app/installations/42/access_tokens" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		raw := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		tok, err := jwt.ParseWithClaims(raw, &jwt.RegisteredClaims{}, func(*jwt.Token) (any, error) { return pub, nil },
			jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer("1234"), jwt.WithExpirationRequired(),
			jwt.WithTimeFunc(env.clock.Now))
		if err != nil || !tok.Valid || refuse.Load() {
			http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"token": env.issued.issue("ghs_"), "expires_at": env.clock.Now().Add(time.Hour).Format(time.RFC3339),
		})
	}
}

func TestMint_GitHubApp(t *testing.T) {
	key, pemKey := testKey(t)
	var e *mintEnv
	var refuse atomic.Bool
	e = newMintEnv(t, githubStandIn(t, &e, &key.PublicKey, &refuse))
	e.set(t, "GITHUB", mint.KindGitHubApp, map[string]any{
		"app_id": 1234, "installation_id": "42", "private_key": pemKey, "api_url": e.mintAt.URL,
	})

	status, body := e.call(t, "GITHUB")
	if status != http.StatusOK {
		t.Fatalf("first call = %d %s, want 200", status, body)
	}
	if !strings.Contains(body, e.token) {
		t.Errorf("the echoed Authorization = %s, want the box's own token in the minted one's place", body)
	}
	for i := 0; i < 3; i++ {
		if status, body := e.call(t, "GITHUB"); status != http.StatusOK {
			t.Fatalf("cached call = %d %s, want 200", status, body)
		}
	}
	if n := e.issued.n.Load(); n != 1 {
		t.Errorf("mints after 4 calls within the token's life = %d, want 1", n)
	}

	// 54 minutes on, the token has 6 minutes left: still used.
	e.clock.Advance(54 * time.Minute)
	e.call(t, "GITHUB")
	if n := e.issued.n.Load(); n != 1 {
		t.Errorf("mints with 6 minutes left = %d, want 1", n)
	}
	// 56 minutes on, 4 minutes left: minted anew.
	e.clock.Advance(2 * time.Minute)
	if status, _ := e.call(t, "GITHUB"); status != http.StatusOK {
		t.Fatalf("call near expiry = %d, want 200", status)
	}
	if n := e.issued.n.Load(); n != 2 {
		t.Errorf("mints once near expiry = %d, want 2", n)
	}

	// Revoked at GitHub: the host's 401 reaches the box, and the next
	// call mints anew.
	e.issued.revokeAll()
	if status, _ := e.call(t, "GITHUB"); status != http.StatusUnauthorized {
		t.Errorf("call with a revoked token = %d, want the host's 401", status)
	}
	if status, body := e.call(t, "GITHUB"); status != http.StatusOK {
		t.Errorf("call after a revocation = %d %s, want 200 with a new token", status, body)
	}
	if n := e.issued.n.Load(); n != 3 {
		t.Errorf("mints after a revocation = %d, want 3", n)
	}

	// The app's key refused: 502 naming what the owner must renew. (A
	// host's 401 drops a token at most once each RemintEvery.)
	e.clock.Advance(mint.DefaultRemintEvery)
	refuse.Store(true)
	e.issued.revokeAll()
	e.call(t, "GITHUB") // the host's 401 drops the cached token
	status, body = e.call(t, "GITHUB")
	if status != http.StatusBadGateway || !strings.Contains(body, "GitHub App key or installation needs renewing") {
		t.Errorf("call with the app refused = %d %s, want 502 naming the app's key", status, body)
	}

	// Every mint is audited, without the token.
	entries := e.audited(t)
	var mints, refusals int
	for _, en := range entries {
		if en.Method != "MINT" {
			continue
		}
		for _, v := range e.issued.all() {
			if strings.Contains(en.Message, v) {
				t.Errorf("audit entry holds a minted token: %+v", en)
			}
		}
		if en.Reason == "mint-refused" {
			refusals++
		} else if strings.Contains(en.Message, "github-app") && strings.Contains(en.Message, "expires") {
			mints++
		}
	}
	if mints != 3 || refusals != 1 {
		t.Errorf("audited mints = %d, refusals = %d; want 3 and 1", mints, refusals)
	}
}

// oauthStandIn is a token endpoint that rotates refresh tokens: each
// refresh token works once, and is replaced by the next. It answers
// invalid_grant when told to refuse, and waits for gate (when not nil)
// before it answers.
type oauthStandIn struct {
	e       **mintEnv
	mu      sync.Mutex // guards refresh
	refresh string
	refuse  atomic.Bool
	gate    chan struct{}
	arrived chan struct{}
}

func (o *oauthStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	env := *o.e
	if o.arrived != nil {
		select {
		case o.arrived <- struct{}{}:
		default:
		}
	}
	if o.gate != nil {
		<-o.gate
	}
	user, pass, _ := r.BasicAuth()
	_ = r.ParseForm()
	o.mu.Lock()
	defer o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if o.refuse.Load() || user != "client-1" || pass != "client-secret-1" || r.PostForm.Get("grant_type") != "refresh_token" ||
		r.PostForm.Get("refresh_token") != o.refresh {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"the refresh token is not valid"}`)
		return
	}
	o.refresh = "rt-" + randomHex(12)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": env.issued.issue("at_"), "token_type": "Bearer", "expires_in": 3600, "refresh_token": o.refresh,
	})
}

func oauthConfig(e *mintEnv) map[string]any {
	return map[string]any{"token_url": e.mintAt.URL + "/oauth/token", "client_id": "client-1", "client_secret": "client-secret-1",
		"refresh_token": "rt-first", "scopes": []string{"read"}}
}

func TestMint_OAuth2(t *testing.T) {
	var e *mintEnv
	o := &oauthStandIn{e: &e, refresh: "rt-first"}
	e = newMintEnv(t, o.ServeHTTP)
	e.set(t, "API", mint.KindOAuth2, oauthConfig(e))

	if status, body := e.call(t, "API"); status != http.StatusOK {
		t.Fatalf("first call = %d %s, want 200", status, body)
	}
	e.call(t, "API")
	if n := e.issued.n.Load(); n != 1 {
		t.Errorf("mints after 2 calls = %d, want 1", n)
	}
	// The rotated refresh token is kept, sealed.
	st, err := e.br.Server.Store.MintState(t.Context(), "shop", "API")
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	current := o.refresh
	o.mu.Unlock()
	if strings.Contains(string(st.Sealed), current) {
		t.Errorf("the kept refresh token is in the clear")
	}
	plain, err := e.br.Server.Keyring.Open(st.Sealed, mint.RefreshAD("shop", "API"))
	if err != nil || string(plain) != current {
		t.Errorf("kept refresh token = %v, want the rotated one", err)
	}
	// After expiry the broker refreshes with the rotated token (the
	// first one no longer works).
	e.clock.Advance(time.Hour)
	if status, body := e.call(t, "API"); status != http.StatusOK {
		t.Fatalf("call after expiry = %d %s, want 200 with the rotated refresh token", status, body)
	}
	if n := e.issued.n.Load(); n != 2 {
		t.Errorf("mints after expiry = %d, want 2", n)
	}

	// The grant revoked: 502 saying the owner's grant needs renewing,
	// and the state says so for `secret list`.
	o.refuse.Store(true)
	e.clock.Advance(time.Hour)
	status, body := e.call(t, "API")
	if status != http.StatusBadGateway || !strings.Contains(body, "OAuth grant needs renewing") {
		t.Errorf("call with the grant refused = %d %s, want 502 saying the grant needs renewing", status, body)
	}
	if strings.Contains(body, current) || strings.Contains(body, "client-secret-1") {
		t.Errorf("the refusal holds the refresh token or client secret: %s", body)
	}
	st, err = e.br.Server.Store.MintState(t.Context(), "shop", "API")
	if err != nil || !strings.Contains(st.Failure, "invalid_grant") {
		t.Errorf("kept state = %+v, %v; want the refusal recorded", st, err)
	}
	// Refused again at once without asking the endpoint.
	before := len(e.minted)
	e.call(t, "API")
	if len(e.minted) != before {
		t.Errorf("a refusal was asked again at once (%d requests, want %d)", len(e.minted), before)
	}
}

// TestMint_AuditedMintReadsAsEnglish: an oauth2 mint's audit message
// says "minted an oauth2 token", with the article its kind takes.
func TestMint_AuditedMintReadsAsEnglish(t *testing.T) {
	var e *mintEnv
	o := &oauthStandIn{e: &e, refresh: "rt-first"}
	e = newMintEnv(t, o.ServeHTTP)
	e.set(t, "API", mint.KindOAuth2, oauthConfig(e))
	if status, body := e.call(t, "API"); status != http.StatusOK {
		t.Fatalf("call = %d %s, want 200", status, body)
	}
	entries := e.audited(t)
	var msgs []string
	for _, en := range entries {
		if en.Method == "MINT" {
			msgs = append(msgs, en.Message)
		}
	}
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], "minted an oauth2 token for API (expires ") {
		t.Errorf("audited mints = %q, want one: minted an oauth2 token for API (expires …)", msgs)
	}
}

// TestMint_ConcurrentCallsMintOnce: 50 concurrent calls for a token not
// yet minted make one request to the token endpoint.
func TestMint_ConcurrentCallsMintOnce(t *testing.T) {
	var e *mintEnv
	o := &oauthStandIn{e: &e, refresh: "rt-first", gate: make(chan struct{}), arrived: make(chan struct{}, 1)}
	e = newMintEnv(t, o.ServeHTTP)
	e.set(t, "API", mint.KindOAuth2, oauthConfig(e))
	var wg sync.WaitGroup
	codes := make([]int, 50)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := e.br.Do(http.MethodGet, "/egress/API/x", e.token, nil, nil)
			codes[i] = resp.StatusCode
		}()
	}
	<-o.arrived // one mint is in flight; the others join it or find its token
	close(o.gate)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("call %d = %d, want 200", i, c)
		}
	}
	if n := e.issued.n.Load(); n != 1 {
		t.Errorf("mints for 50 concurrent calls = %d, want 1", n)
	}
}

// TestMint_EndpointRedirectNotFollowed: a token endpoint that redirects
// elsewhere is not followed; the other server is never asked.
func TestMint_EndpointRedirectNotFollowed(t *testing.T) {
	var asked atomic.Int64
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		body, _ := io.ReadAll(r.Body)
		t.Errorf("the other server was asked: %s %s", r.URL, body)
	}))
	defer other.Close()
	e := newMintEnv(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	})
	e.set(t, "API", mint.KindOAuth2, oauthConfig(e))
	if status, body := e.call(t, "API"); status != http.StatusBadGateway {
		t.Errorf("call through a redirecting endpoint = %d %s, want 502", status, body)
	}
	if asked.Load() != 0 {
		t.Errorf("the redirect target was asked %d times", asked.Load())
	}
}

// TestMint_GitHubAppConcurrentCallsMintOnce: 20 concurrent calls for an
// installation token not yet minted make one exchange.
func TestMint_GitHubAppConcurrentCallsMintOnce(t *testing.T) {
	key, pemKey := testKey(t)
	var e *mintEnv
	var refuse atomic.Bool
	e = newMintEnv(t, githubStandIn(t, &e, &key.PublicKey, &refuse))
	e.set(t, "GITHUB", mint.KindGitHubApp, map[string]any{
		"app_id": 1234, "installation_id": 42, "private_key": pemKey, "api_url": e.mintAt.URL,
	})
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.br.Do(http.MethodGet, "/egress/GITHUB/x", e.token, nil, nil).StatusCode
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("call %d = %d, want 200", i, c)
		}
	}
	if n := e.issued.n.Load(); n != 1 {
		t.Errorf("exchanges for 20 concurrent calls = %d, want 1", n)
	}
}

// TestMint_EndpointEchoingWhatItWasSentIsNotLogged: a token endpoint
// answers 200 with what the broker sent it (the client's Basic
// credentials, the form with the refresh token in it) where a number
// belongs (expires_in), or as an answer that is neither JSON nor a form.
// golang.org/x/oauth2 quotes such an answer in its error, which the
// broker logs: the client secret and the refresh token, percent-escaped
// or in base64, would be written to the log, where no raw search finds
// them. The error of an answer that is not a token says so in the
// broker's own words.
func TestMint_EndpointEchoingWhatItWasSentIsNotLogged(t *testing.T) {
	const secret, refresh = "client/secret+1=", "1//0gRefresh+Token/abc="
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, auth, form string)
	}{
		{"Basic credentials as expires_in", func(w http.ResponseWriter, auth, _ string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"at_1","expires_in":%q}`, auth)
		}},
		{"the form as expires_in", func(w http.ResponseWriter, _, form string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"at_1","expires_in":%q}`, form)
		}},
		{"the form as a bad form answer", func(w http.ResponseWriter, _, form string) {
			w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
			fmt.Fprint(w, "%zz;"+form)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &brokertest.Buffer{}
			e := newMintEnvLogs(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				tt.answer(w, r.Header.Get("Authorization"), string(body))
			}, nil, logs)
			e.set(t, "API", mint.KindOAuth2, map[string]any{"token_url": e.mintAt.URL + "/oauth/token", "client_id": "client-1",
				"client_secret": secret, "refresh_token": refresh})
			status, body := e.call(t, "API")
			if status != http.StatusBadGateway {
				t.Fatalf("call = %d %s, want 502", status, body)
			}
			basic := base64.StdEncoding.EncodeToString([]byte("client-1:" + url.QueryEscape(secret)))
			for _, v := range []string{secret, refresh, url.QueryEscape(secret), url.QueryEscape(refresh), basic} {
				if strings.Contains(logs.String(), v) || strings.Contains(body, v) {
					t.Errorf("the log or the answer holds %q, a form of what the broker sent the token endpoint:\n%s", v, logs)
				}
			}
		})
	}
}

// TestMint_EndpointRepeatingTheFormInAMalformedAnswerIsNotLogged: an
// oauth2 secret whose client authenticates in the form ("auth_style":
// "body") sends its client secret and refresh token in the request's
// body, where the transport's own rewording (quiet.Errors, which reads
// the request's header and URL) does not look. A token endpoint answering
// a status line or a header line made of the form it received has Go's
// transport quote it, percent-escaped as the form wrote it, in the
// error the broker logs. Every form of the values the mint
// sent is taken out of its error's text.
func TestMint_EndpointRepeatingTheFormInAMalformedAnswerIsNotLogged(t *testing.T) {
	const secret, refresh = "client/secret+1=", "1//0gRefresh+Token/abc="
	for _, tt := range []struct {
		name   string
		answer func(form string) string
	}{
		{"as the status code", func(form string) string { return "HTTP/1.1 " + form + " OK\r\n\r\n" }},
		{"as a header line", func(form string) string { return "HTTP/1.1 200 OK\r\n" + form + "\r\n\r\n" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &brokertest.Buffer{}
			e := newMintEnvLogs(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				c, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				io.WriteString(c, tt.answer(string(body)))
			}, nil, logs)
			e.set(t, "API", mint.KindOAuth2, map[string]any{"token_url": e.mintAt.URL + "/oauth/token", "client_id": "client-1",
				"client_secret": secret, "refresh_token": refresh, "auth_style": "body"})
			status, body := e.call(t, "API")
			if status != http.StatusBadGateway {
				t.Fatalf("call = %d %s, want 502", status, body)
			}
			for _, v := range []string{secret, refresh, url.QueryEscape(secret), url.QueryEscape(refresh)} {
				if strings.Contains(logs.String(), v) || strings.Contains(body, v) {
					t.Errorf("the log or the answer holds %q, a form of what the broker sent the token endpoint:\n%s", v, logs)
				}
			}
		})
	}
}

// TestMint_ErrorAnsweredWith200IsARefusal: a token endpoint answers
// RFC 6749's error shape (the error field, in JSON or a form) with a 200,
// as some endpoints do, where the RFC gives it a 400. It is the refusal
// it says it is, in the words the same body with a 400 gets (the box's
// answer, the kept state, the audit), never an endpoint unreachable for
// a moment and asked again every few seconds; and the endpoint repeating
// what the broker sent it (the client's Basic credentials, the form
// with the refresh token) in the description or as the error code has
// none of it logged, kept or answered.
func TestMint_ErrorAnsweredWith200IsARefusal(t *testing.T) {
	const secret, refresh = "client/secret+1=", "1//0gRefresh+Token/abc="
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, status int, auth, form string)
	}{
		{"JSON, the request in the description", func(w http.ResponseWriter, status int, auth, form string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":"invalid_grant","error_description":%q}`, auth+" "+form)
		}},
		{"JSON, the request as the code", func(w http.ResponseWriter, status int, auth, form string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":%q}`, auth+" "+form)
		}},
		{"a form, the request in the description", func(w http.ResponseWriter, status int, auth, form string) {
			w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
			w.WriteHeader(status)
			fmt.Fprint(w, url.Values{"error": {"invalid_grant"}, "error_description": {auth + " " + form}}.Encode())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &brokertest.Buffer{}
			var status atomic.Int64
			e := newMintEnvLogs(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				tt.answer(w, int(status.Load()), r.Header.Get("Authorization"), string(body))
			}, nil, logs)
			e.set(t, "API", mint.KindOAuth2, map[string]any{"token_url": e.mintAt.URL + "/oauth/token", "client_id": "client-1",
				"client_secret": secret, "refresh_token": refresh})
			type seenAs struct {
				status        int
				body, failure string
			}
			got := map[int]seenAs{}
			for _, st := range []int{http.StatusBadRequest, http.StatusOK} {
				status.Store(int64(st))
				e.clock.Advance(time.Hour) // past the last refusal
				code, body := e.call(t, "API")
				ms, err := e.br.Server.Store.MintState(t.Context(), "shop", "API")
				if err != nil {
					t.Fatal(err)
				}
				got[st] = seenAs{code, body, ms.Failure}
			}
			if want := got[http.StatusBadRequest]; got[http.StatusOK] != want {
				t.Errorf("answered with a 200 = %+v, want what the 400 gives: %+v", got[http.StatusOK], want)
			}
			if g := got[http.StatusOK]; g.status != http.StatusBadGateway || !strings.Contains(g.body, "OAuth grant needs renewing") || g.failure == "" {
				t.Errorf("answered with a 200 = %+v, want 502 saying the grant needs renewing, and the refusal kept", g)
			}
			// A refusal is not asked again a few seconds on, as a failure is.
			before := len(e.minted)
			e.clock.Advance(mint.DefaultRemintEvery)
			e.call(t, "API")
			if len(e.minted) != before {
				t.Errorf("the refusal answered with a 200 was asked again %s on", mint.DefaultRemintEvery)
			}
			entries := e.audited(t)
			var kept strings.Builder
			refusals := 0
			for _, en := range entries {
				kept.WriteString(en.Message + "\n")
				if en.Method == "MINT" && en.Reason == "mint-refused" {
					refusals++
				}
			}
			if refusals != 2 {
				t.Errorf("audited mint refusals = %d, want 2 (the 400's and the 200's)", refusals)
			}
			all := logs.String() + got[http.StatusOK].body + got[http.StatusOK].failure + kept.String()
			basic := base64.StdEncoding.EncodeToString([]byte("client-1:" + url.QueryEscape(secret)))
			for _, v := range []string{secret, refresh, url.QueryEscape(secret), url.QueryEscape(refresh), basic} {
				if strings.Contains(all, v) {
					t.Errorf("the log, the answer, the kept state or the audit holds %q, a form of what the broker sent the token endpoint:\n%s", v, all)
				}
			}
		})
	}
}

// flakyMints is a store whose reads of the kept mint state fail while
// fail is set, and whose writes of it while failSet is, as a store that
// does not answer in time.
type flakyMints struct {
	store.Store
	fail, failSet atomic.Bool
}

func (f *flakyMints) SetMintState(ctx context.Context, st store.MintState) error {
	if f.failSet.Load() {
		return errors.New("store: deadline exceeded")
	}
	return f.Store.SetMintState(ctx, st)
}

func (f *flakyMints) MintState(ctx context.Context, box, name string) (store.MintState, error) {
	if f.fail.Load() {
		return store.MintState{}, errors.New("store: deadline exceeded")
	}
	return f.Store.MintState(ctx, box, name)
}

// TestMint_UnreadableKeptRefreshTokenNeverBurnsTheGrant: the token
// endpoint rotates refresh tokens and, as Auth0 and Okta do, revokes the
// whole grant when one already used is sent again. The broker keeps the
// rotated one; when a read of it fails (the store slow for a moment),
// minting with the configuration's own refresh token, used long ago,
// revokes the owner's grant, and the refusal written over the kept state
// loses the rotated token as well. A mint whose kept state cannot be
// read is not made.
func TestMint_UnreadableKeptRefreshTokenNeverBurnsTheGrant(t *testing.T) {
	e, flaky, revoked := newReuseDetectingEnv(t)
	if status, body := e.call(t, "API"); status != http.StatusOK {
		t.Fatalf("first call = %d %s, want 200", status, body)
	}
	e.clock.Advance(time.Hour)
	flaky.fail.Store(true)
	if status, body := e.call(t, "API"); status == http.StatusOK {
		t.Errorf("call while the kept state cannot be read = %d %s, want a refusal", status, body)
	}
	flaky.fail.Store(false)
	e.clock.Advance(time.Minute)
	if status, body := e.call(t, "API"); status != http.StatusOK {
		t.Errorf("call once the store answers = %d %s, want 200 on the kept refresh token", status, body)
	}
	if revoked() {
		t.Errorf("the token endpoint saw a refresh token used before, and revoked the grant")
	}
}

// TestMint_UnwrittenRotatedRefreshTokenIsStillUsed: the store fails to
// keep the refresh token the endpoint rotated to (slow for a moment).
// The next refresh, made with the one kept before (already used), had an
// endpoint that detects reuse revoke the grant. The rotated one is kept
// in memory until the store takes it, and used.
func TestMint_UnwrittenRotatedRefreshTokenIsStillUsed(t *testing.T) {
	e, flaky, revoked := newReuseDetectingEnv(t)
	flaky.failSet.Store(true)
	if status, body := e.call(t, "API"); status != http.StatusOK {
		t.Fatalf("first call = %d %s, want 200", status, body)
	}
	flaky.failSet.Store(false)
	for i := range 2 {
		e.clock.Advance(time.Hour)
		if status, body := e.call(t, "API"); status != http.StatusOK {
			t.Errorf("refresh %d after the store failed to keep the rotated token = %d %s, want 200", i, status, body)
		}
	}
	if revoked() {
		t.Errorf("the token endpoint saw a refresh token used before, and revoked the grant")
	}
}

// newReuseDetectingEnv is a mint env whose store's mint state can be made
// to fail, with the oauth2 secret API at a token endpoint that rotates
// refresh tokens and revokes the grant when one is used twice (revoked
// reports whether it did).
func newReuseDetectingEnv(t *testing.T) (e *mintEnv, flaky *flakyMints, revoked func() bool) {
	t.Helper()
	var mu sync.Mutex
	used := map[string]bool{}
	current, burnt := "rt-first", false
	flaky = &flakyMints{Store: sqlitetest.Fleet(t, 0)}
	e = newMintEnvWith(t, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		rt := r.PostForm.Get("refresh_token")
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if used[rt] {
			burnt = true // reuse detected: the grant is revoked
		}
		used[rt] = true
		if burnt || rt != current {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		current = "rt-" + randomHex(12)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": e.issued.issue("at_"), "expires_in": 3600, "refresh_token": current})
	}, nil, brokertest.Options{Store: flaky})
	e.set(t, "API", mint.KindOAuth2, oauthConfig(e))
	return e, flaky, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return burnt
	}
}

// audited is the box shop's audit entries, once the audit is written out.
func (e *mintEnv) audited(t *testing.T) []store.AuditEntry {
	t.Helper()
	if err := e.br.Server.Audit.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	entries, err := e.br.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "shop", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
