// Package sso signs a person in to the owner's page with OpenID Connect:
// the authorization-code flow with PKCE (S256), its state and nonce
// checked, the ID token verified by github.com/coreos/go-oidc (signature
// against the provider's published keys, issuer, audience, expiry), and
// the person's role — viewer or operator — read from one claim of the ID
// token against lists the operator configures.
//
// The package holds no session of its own: Finish returns the Identity,
// and the owner's page (package ui) makes its usual sealed session from
// it. Between Start and Finish the flow's state, nonce and PKCE verifier
// travel in a short-lived cookie sealed under the master key, so any
// replica can finish a flow another began. No token, code, verifier or
// client secret is ever logged or shown.
package sso

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/quiet"
)

// The owner's page's routes of the flow.
const (
	// StartPath begins a sign-in: it redirects to the identity provider.
	StartPath = "/ui/sso/start"
	// CallbackPath is where the identity provider sends the browser back;
	// Config.RedirectURL must end in it.
	CallbackPath = "/ui/sso/callback"
)

// FlowCookie carries a flow's state, nonce and verifier, sealed, from
// Start to Finish.
const FlowCookie = "boxbroker_sso"

// flowAD is the additional data a flow is sealed with.
const flowAD = "sso-flow"

// flowTTL bounds the time between Start and Finish.
const flowTTL = 10 * time.Minute

// Role is what a signed-in person may do on the owner's page.
type Role string

// The roles.
const (
	// Viewer sees every page and changes nothing.
	Viewer Role = "viewer"
	// Operator sees and acts: every form that changes anything.
	Operator Role = "operator"
)

// CanAct reports whether r may post a form that changes anything.
func (r Role) CanAct() bool { return r == Operator }

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool { return r == Viewer || r == Operator }

// Config configures single sign-on. Its zero value is off.
type Config struct {
	// Issuer is the identity provider's issuer URL, whose
	// /.well-known/openid-configuration is read on the first sign-in;
	// "" turns single sign-on off. It must be https, except on a
	// loopback host.
	Issuer string
	// ClientID is the client registered at the provider for this broker.
	ClientID string
	// ClientSecret is that client's secret; "" for a public client (PKCE
	// alone). It never comes from argv.
	ClientSecret string
	// RedirectURL is the owner's page's callback as the browser reaches
	// it, such as https://broker.example.com:8788/ui/sso/callback; its
	// path is CallbackPath. It is registered at the provider.
	RedirectURL string
	// Scopes are asked for besides "openid"; nil asks for "email" and
	// "profile".
	Scopes []string
	// RoleClaim is the ID token's claim the roles are read from: a string
	// or a list of strings, such as "email" or "groups" (default "email").
	// With "email", the token's email_verified must be true.
	RoleClaim string
	// Operators are the claim's values that make an operator.
	Operators []string
	// Viewers are the claim's values that make a viewer; "*" makes every
	// person the provider signs in a viewer. A person matching neither
	// list is refused.
	Viewers []string
	// HTTPClient reaches the provider; nil uses one with bounded waits.
	HTTPClient *http.Client
}

// Enabled reports whether single sign-on is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Validate reports every problem with an enabled c, naming the flags.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var p []string
	if msg := checkURL(c.Issuer); msg != "" {
		p = append(p, "sso-issuer (BOXBROKER_SSO_ISSUER) "+msg)
	}
	if c.ClientID == "" {
		p = append(p, "sso-client-id (BOXBROKER_SSO_CLIENT_ID) is empty")
	}
	if msg := checkURL(c.RedirectURL); msg != "" {
		p = append(p, "sso-redirect-url (BOXBROKER_SSO_REDIRECT_URL) "+msg)
	} else if u, _ := url.Parse(c.RedirectURL); u.Path != CallbackPath {
		p = append(p, fmt.Sprintf("sso-redirect-url (BOXBROKER_SSO_REDIRECT_URL) has path %q; it must be %s", u.Path, CallbackPath))
	}
	if len(c.Operators) == 0 && len(c.Viewers) == 0 {
		p = append(p, "single sign-on names no operator and no viewer (--sso-operators, --sso-viewers): nobody could sign in")
	}
	if slices.Contains(c.Operators, "*") {
		p = append(p, "sso-operators (BOXBROKER_SSO_OPERATORS) holds \"*\": an operator is named, never everyone")
	}
	if len(p) > 0 {
		return errors.New("single sign-on: " + strings.Join(p, "; "))
	}
	return nil
}

// checkURL says what is wrong with an issuer or redirect URL, "" when
// nothing: it is absolute, https or http on a loopback host. It never
// quotes what it was given whole: an operator may have pasted the client
// secret there, or put a password or a token in the URL; it names the
// scheme and host at most.
func checkURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "is not an absolute URL such as https://id.example.com (what was given is not shown: it may hold a credential)"
	}
	shown := u.Scheme + "://" + u.Host
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Sprintf("%q… holds a user, a query or a fragment; give the URL without them", shown)
	}
	if (u.Scheme == "https" || u.Scheme == "http") && !quiet.InClear(u) {
		return ""
	}
	return fmt.Sprintf("%q is not https (http only on a loopback host)", shown)
}

// Identity is a person the provider signed in, with the role they map to.
type Identity struct {
	// Issuer and Subject name the person for good.
	Issuer, Subject string
	// Name is how pages, logs and audit rows name them: the email the
	// provider verified, or else the preferred username, or else the
	// subject.
	Name string
	Role Role
	// Claim and Grounds are what Role rests on: the role claim's name and
	// those of its values one of the role lists names (at most maxGrounds).
	// A session keeps them, and RoleOf judges them again on each request.
	Claim   string
	Grounds []string
}

// Errors of Finish.
var (
	// ErrFlow means the callback did not finish a flow this browser began
	// here: no or an expired flow cookie, a state that is not the flow's,
	// an error answer from the provider, or no code.
	ErrFlow = errors.New("sign-in flow")
	// ErrToken means the provider's answer did not hold an ID token this
	// broker accepts: bad signature, issuer, audience, expiry or nonce.
	ErrToken = errors.New("ID token")
	// ErrNoRole means the person is signed in at the provider but is in
	// neither the operators' nor the viewers' list.
	ErrNoRole = errors.New("no role")
	// ErrProvider means the provider could not be reached or answered
	// amiss (discovery or the code exchange).
	ErrProvider = errors.New("identity provider")
)

// Sealer seals and opens the flow cookie; the master key's Keyring is one.
type Sealer interface {
	Seal(plaintext []byte, ad string) ([]byte, error)
	Open(sealed []byte, ad string) ([]byte, error)
}

// Provider runs the flow against one identity provider.
type Provider struct {
	cfg    Config
	seal   Sealer
	now    func() time.Time
	client *http.Client

	mu       sync.Mutex // guards op, verifier, failed and failedAt
	op       *oidc.Provider
	verifier *oidc.IDTokenVerifier
	// failed is the last discovery's error, at failedAt, until one
	// succeeds.
	failed   error
	failedAt time.Time
}

// New returns a Provider for the enabled, valid cfg. It does not reach
// the provider: discovery happens on the first sign-in, and is tried
// again after a failure, so a provider that is down does not stop the
// broker from starting. now nil is time.Now.
func New(cfg Config, seal Sealer, now func() time.Time) (*Provider, error) {
	if !cfg.Enabled() {
		return nil, errors.New("single sign-on: no issuer")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if seal == nil {
		return nil, errors.New("single sign-on: no sealer")
	}
	cfg.RoleClaim = cmp.Or(cfg.RoleClaim, "email")
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"email", "profile"}
	}
	defaults.Clock(&now)
	client := cfg.HTTPClient
	if client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 10 * time.Second
		t.MaxResponseHeaderBytes = quiet.MaxAnswerHeader
		t.MaxIdleConnsPerHost = 2
		client = &http.Client{Transport: t, Timeout: 15 * time.Second}
	}
	// The client secret goes to the provider in a header: an error never
	// quotes it. go-oidc reads the discovery document and the keys whole:
	// each answer is read to maxAnswer bytes at most.
	hc := *client
	hc.Transport = quiet.Bodies(quiet.Errors(hc.Transport), maxAnswer)
	hc.CheckRedirect = redirectGET
	client = &hc
	return &Provider{cfg: cfg, seal: seal, now: now, client: client}, nil
}

// FailedFor is how long a failed discovery is remembered: a sign-in
// begun within it fails as the discovery did (ErrRemembered), without
// asking the provider. Anyone who reaches the admin listener may send
// GET /ui/sso/start (a page the operator visits, by an <img>), and each
// would otherwise be a request to the provider and a logged failure.
const FailedFor = 5 * time.Second

// ErrRemembered means the provider was not asked: its discovery failed
// less than FailedFor ago. An error wrapping it wraps that failure's too
// (ErrProvider).
var ErrRemembered = errors.New("not asked again yet")

// discover reads the provider's configuration once it answers. After a
// failure it asks again only once FailedFor has passed.
func (p *Provider) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.op != nil {
		return p.op, p.verifier, nil
	}
	if p.failed != nil && p.now().Sub(p.failedAt) < FailedFor {
		return nil, nil, fmt.Errorf("%w (%w: it failed less than %s ago)", p.failed, ErrRemembered, FailedFor)
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, p.client), 15*time.Second)
	defer cancel()
	op, err := oidc.NewProvider(dctx, p.cfg.Issuer)
	if err != nil {
		err = fmt.Errorf("%w: discovery at %s: %w", ErrProvider, p.cfg.Issuer, quoted(err))
		if ctx.Err() == nil { // the provider's failure, not a client gone away
			p.failed, p.failedAt = err, p.now()
		}
		return nil, nil, err
	}
	p.failed = nil
	p.op = op
	p.verifier = op.VerifierContext(oidc.ClientContext(context.Background(), p.client),
		&oidc.Config{ClientID: p.cfg.ClientID, Now: p.now})
	return p.op, p.verifier, nil
}

func (p *Provider) oauth(op *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, RedirectURL: p.cfg.RedirectURL,
		Endpoint: op.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID}, p.cfg.Scopes...),
	}
}

// flow is what the flow cookie holds.
type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Expires  int64  `json:"e"`
}

// random returns 32 random bytes in hex, for a flow's state and nonce.
// crypto/rand.Read never fails.
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start begins a sign-in: it sets the flow cookie (SameSite=Lax, so that
// the provider's redirect back carries it) and redirects the browser to
// the provider with the state, nonce and PKCE challenge.
func (p *Provider) Start(w http.ResponseWriter, r *http.Request) error {
	op, _, err := p.discover(r.Context())
	if err != nil {
		return err
	}
	state, nonce := random(), random()
	f := flow{State: state, Nonce: nonce, Verifier: oauth2.GenerateVerifier(), Expires: p.now().Add(flowTTL).Unix()}
	j, _ := json.Marshal(f) // strings and a number: it never fails
	sealed, err := p.seal.Seal(j, flowAD)
	if err != nil {
		return fmt.Errorf("seal sign-in flow: %w", err)
	}
	p.setFlowCookie(w, r, base64.RawURLEncoding.EncodeToString(sealed))
	to := p.oauth(op).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(f.Verifier))
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

func (p *Provider) setFlowCookie(w http.ResponseWriter, r *http.Request, value string) {
	c := &http.Cookie{Name: FlowCookie, Value: value, Path: "/ui/sso/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: p.Secure(r), MaxAge: int(flowTTL.Seconds())}
	if value == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// Finish ends a sign-in at the callback: it checks the flow cookie and
// the state, exchanges the code with the PKCE verifier, verifies the ID
// token and its nonce, and maps the person to a role. It clears the flow
// cookie whatever the outcome, so a flow is finished at most once. Its
// errors wrap ErrFlow, ErrToken, ErrNoRole or ErrProvider.
func (p *Provider) Finish(w http.ResponseWriter, r *http.Request) (Identity, error) {
	p.setFlowCookie(w, r, "")
	f, err := p.openFlow(r)
	if err != nil {
		return Identity{}, err
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return Identity{}, fmt.Errorf("%w: the provider answered %s", ErrFlow, clean(e, 64))
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		return Identity{}, fmt.Errorf("%w: the state is not this browser's", ErrFlow)
	}
	code := q.Get("code")
	if code == "" || len(code) > 4096 {
		return Identity{}, fmt.Errorf("%w: no code", ErrFlow)
	}
	op, verifier, err := p.discover(r.Context())
	if err != nil {
		return Identity{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), oauth2.HTTPClient, p.client), 15*time.Second)
	defer cancel()
	tok, err := p.oauth(op).Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return Identity{}, fmt.Errorf("%w: code exchange: %w", ErrProvider, redactExchange(err))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: the provider's answer holds none", ErrToken)
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrToken, quoted(err))
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: the nonce is not this flow's", ErrToken)
	}
	// OpenID Connect bounds sub to 255 ASCII characters; the session
	// cookie carries it.
	if idt.Subject == "" || len(idt.Subject) > 255 || clean(idt.Subject, 255) != idt.Subject {
		return Identity{}, fmt.Errorf("%w: the subject is empty, over 255 bytes or holds control characters", ErrToken)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %w", ErrToken, err)
	}
	id := Identity{Issuer: idt.Issuer, Subject: idt.Subject, Name: nameOf(claims, idt.Subject)}
	role, ok := p.roleOf(claims)
	if !ok {
		return id, fmt.Errorf("%w: %s is neither an operator nor a viewer here", ErrNoRole, id.Name)
	}
	id.Role, id.Claim, id.Grounds = role, p.cfg.RoleClaim, p.groundsOf(claims)
	return id, nil
}

// redactExchange keeps an exchange error's kind and status, never the
// provider's body (which may echo the code).
func redactExchange(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("token endpoint answered %d %s", status, clean(re.ErrorCode, 64))
	}
	return err
}

func (p *Provider) openFlow(r *http.Request) (flow, error) {
	c, err := r.Cookie(FlowCookie)
	if err != nil || c.Value == "" || len(c.Value) > 1024 {
		return flow{}, fmt.Errorf("%w: no flow cookie", ErrFlow)
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return flow{}, fmt.Errorf("%w: flow cookie", ErrFlow)
	}
	j, err := p.seal.Open(sealed, flowAD)
	if err != nil {
		return flow{}, fmt.Errorf("%w: flow cookie", ErrFlow)
	}
	var f flow
	if err := json.Unmarshal(j, &f); err != nil || f.State == "" || f.Nonce == "" || f.Verifier == "" {
		return flow{}, fmt.Errorf("%w: flow cookie", ErrFlow)
	}
	if p.now().Unix() >= f.Expires {
		return flow{}, fmt.Errorf("%w: the flow expired", ErrFlow)
	}
	return f, nil
}

// maxGrounds bounds the claim values a session keeps to judge its role
// again (RoleOf); each is a value of one of the role lists.
const maxGrounds = 16

// roleOf maps the claims to a role: operator before viewer. With the
// claim email, an address the provider has not verified maps to none.
func (p *Provider) roleOf(claims map[string]any) (Role, bool) {
	if p.cfg.RoleClaim == "email" {
		if v, _ := claims["email_verified"].(bool); !v {
			return "", false
		}
	}
	return p.RoleOf(p.cfg.RoleClaim, p.groundsOf(claims))
}

// groundsOf is the values of the role claim in claims that one of the
// role lists names, each once, at most maxGrounds.
func (p *Provider) groundsOf(claims map[string]any) []string {
	var grounds []string
	for _, v := range claimValues(claims[p.cfg.RoleClaim]) {
		named := slices.Contains(p.cfg.Operators, v) || slices.Contains(p.cfg.Viewers, v)
		if named && len(grounds) < maxGrounds && !slices.Contains(grounds, v) {
			grounds = append(grounds, v)
		}
	}
	return grounds
}

// RoleOf is the role that grounds, values of the claim named claim, give
// under the role lists this Provider was made with: operator before
// viewer; ok is false for none, or a claim that is no longer the role
// claim. The owner's page judges a session's kept grounds so on every
// request, so a person taken off a list (and the broker restarted)
// loses the role at once rather than when the session ends.
func (p *Provider) RoleOf(claim string, grounds []string) (Role, bool) {
	if claim != p.cfg.RoleClaim {
		return "", false
	}
	for _, v := range grounds {
		if slices.Contains(p.cfg.Operators, v) {
			return Operator, true
		}
	}
	if slices.Contains(p.cfg.Viewers, "*") {
		return Viewer, true
	}
	for _, v := range grounds {
		if slices.Contains(p.cfg.Viewers, v) {
			return Viewer, true
		}
	}
	return "", false
}

// claimValues is a claim as strings: one string, or a list's strings.
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// nameOf is how a person is named: their email when the provider has
// verified it (email_verified true), else preferred_username, else sub.
// An email the provider has not verified may be one the person typed in
// (many providers let them edit it), such as another person's, and
// pages, audit rows and decisions would name that person as the actor.
func nameOf(claims map[string]any, sub string) string {
	if v, _ := claims["email_verified"].(bool); v {
		if s, ok := claims["email"].(string); ok && s != "" {
			return clean(s, 200)
		}
	}
	if s, ok := claims["preferred_username"].(string); ok && s != "" {
		return clean(s, 200)
	}
	return clean(sub, 200)
}

// clean bounds s and drops control characters, for logs, pages and
// audit rows.
func clean(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

// OverHTTPS reports whether the browser that sent r reached the broker
// over https, so that a cookie set in answer to it is to be Secure: r
// came over TLS, or its Origin (which a browser sends with a post) is
// https and names r's Host. Behind a TLS-terminating proxy r.TLS is nil
// while the browser is on https, and a cookie set without Secure would
// be sent to a plain-http request for the host (a URL typed or
// bookmarked as http://), where anyone on the network reads it.
func OverHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	o, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && o.Scheme == "https" && o.Host == r.Host
}

// Secure reports whether a cookie set in answer to r is to be Secure:
// OverHTTPS, or r names the host of the https redirect URL, the origin
// browsers reach the owner's page at for single sign-on (its start and
// callback are navigations, which carry no Origin).
func (p *Provider) Secure(r *http.Request) bool {
	if OverHTTPS(r) {
		return true
	}
	u, err := url.Parse(p.cfg.RedirectURL)
	if err != nil || u.Scheme != "https" {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.EqualFold(strings.TrimSuffix(strings.Trim(host, "[]"), "."), u.Hostname())
}

// Issuer is the configured issuer URL, which every ID token names.
func (p *Provider) Issuer() string { return p.cfg.Issuer }
