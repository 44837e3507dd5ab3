// Package ssotest is an OpenID Connect identity provider stand-in for
// tests, on loopback: discovery and keys from go-oidc's oidctest, and an
// authorization endpoint that signs in at once as the person the test
// names, and a token endpoint that checks the PKCE verifier and the
// client's secret and answers with an RS256 ID token. Tests may change
// the token's claims (Tamper) to play a provider that answers amiss.
package ssotest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"
)

// IdP is the stand-in provider.
type IdP struct {
	// URL is its issuer URL.
	URL          string
	ClientID     string
	ClientSecret string

	key *rsa.PrivateKey

	mu sync.Mutex // guards the fields below
	// page makes /auth show a page with an Approve link, as a real
	// provider's sign-in page, rather than redirect at once.
	page bool
	// claims are the signed-in person's claims, besides iss, aud, sub,
	// exp, iat and nonce.
	claims map[string]any
	sub    string
	// tamper, when set, edits every ID token's claims before signing.
	tamper func(map[string]any)
	codes  map[string]grant
	// verifiers are the PKCE verifiers the token endpoint was sent.
	verifiers []string
	// challenges are the code challenges (and methods) /auth was sent.
	challenges []string
	// tokenTo, when set, is where the token endpoint redirects (307)
	// every exchange, to play a provider (or whoever answers for it)
	// sending the client's post elsewhere.
	tokenTo string
}

type grant struct {
	challenge, nonce, redirect string
}

// New starts an IdP on loopback, closed by t.Cleanup, for the client
// clientID with secret.
func New(t testing.TB, clientID, secret string) *IdP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &IdP{ClientID: clientID, ClientSecret: secret, key: key, codes: map[string]grant{}}
	disc := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	mux := http.NewServeMux()
	mux.Handle("/", disc)
	mux.HandleFunc("GET /auth", p.auth)
	mux.HandleFunc("POST /token", p.token)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	disc.SetIssuer(srv.URL)
	p.URL = srv.URL
	return p
}

// SignInAs makes the next sign-ins those of sub with claims (such as
// email, email_verified, groups).
func (p *IdP) SignInAs(sub string, claims map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sub, p.claims = sub, claims
}

// Tamper sets a function that edits every ID token's claims before it is
// signed; nil for none.
func (p *IdP) Tamper(f func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = f
}

// ShowPage makes the authorization endpoint answer with a page holding
// an Approve link (id "approve") back to the client, as a provider's own
// sign-in page does, so that a browser reaches the callback from the
// provider's site; off, it redirects at once.
func (p *IdP) ShowPage(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.page = on
}

// RedirectToken makes the token endpoint answer every exchange with a
// 307 to to; "" for none.
func (p *IdP) RedirectToken(to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokenTo = to
}

// Verifiers returns the PKCE verifiers the token endpoint was sent.
func (p *IdP) Verifiers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.verifiers...)
}

// Challenges returns "method:challenge" for each authorization request.
func (p *IdP) Challenges() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.challenges...)
}

// auth signs in at once and sends the browser back with a code.
func (p *IdP) auth(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("response_type") != "code" {
		http.Error(w, "bad client or response type", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || back.Host == "" {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	code := base64.RawURLEncoding.EncodeToString(b)
	p.mu.Lock()
	p.challenges = append(p.challenges, q.Get("code_challenge_method")+":"+q.Get("code_challenge"))
	p.codes[code] = grant{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: back.String()}
	page := p.page
	p.mu.Unlock()
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	back.RawQuery = v.Encode()
	if page {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><title>Sign in</title><a id="approve" href="`+html.EscapeString(back.String())+`">Approve</a>`)
		return
	}
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token exchanges a code for an ID token, once, after checking the
// client's secret, the redirect URI and the PKCE verifier.
func (p *IdP) token(w http.ResponseWriter, r *http.Request) {
	refuse := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	p.mu.Lock()
	to := p.tokenTo
	p.mu.Unlock()
	if to != "" {
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		return
	}
	if err := r.ParseForm(); err != nil {
		refuse("invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) != 1 {
		refuse("invalid_client")
		return
	}
	verifier := r.PostForm.Get("code_verifier")
	p.mu.Lock()
	p.verifiers = append(p.verifiers, verifier)
	g, found := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	sub, tamper := p.sub, p.tamper
	claims := map[string]any{}
	maps.Copy(claims, p.claims)
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(verifier))
	if !found || r.PostForm.Get("redirect_uri") != g.redirect ||
		g.challenge == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		refuse("invalid_grant")
		return
	}
	now := time.Now()
	claims["iss"], claims["aud"], claims["sub"] = p.URL, p.ClientID, sub
	claims["iat"], claims["exp"] = now.Unix(), now.Add(time.Hour).Unix()
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	if tamper != nil {
		tamper(claims)
	}
	j, err := json.Marshal(claims)
	if err != nil {
		refuse("server_error")
		return
	}
	idt := oidctest.SignIDToken(p.key, "k1", oidc.RS256, string(j))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at-" + sub, "token_type": "Bearer", "expires_in": 3600, "id_token": idt})
}
