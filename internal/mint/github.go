package mint

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultGitHubAPI is where a github-app secret's tokens are minted when
// its configuration names no api_url.
const DefaultGitHubAPI = "https://api.github.com"

// maxMintAnswer bounds a token endpoint's answer.
const maxMintAnswer = 64 << 10

// GitHubApp is a github-app secret: a GitHub App's id and private key
// and an installation id. The broker signs an RS256 JWT with the key
// (issuer the app id, valid ten minutes) and exchanges it at
// POST {api_url}/app/installations/{installation_id}/access_tokens for an
// installation token, narrowed to Repositories and Permissions when set.
type GitHubApp struct {
	AppID          numericID         `json:"app_id"`
	PrivateKey     string            `json:"private_key"`
	InstallationID numericID         `json:"installation_id"`
	Repositories   []string          `json:"repositories,omitempty"`
	Permissions    map[string]string `json:"permissions,omitempty"`
	// APIURL is the GitHub API's base URL; "" means DefaultGitHubAPI.
	APIURL string `json:"api_url,omitempty"`

	key     *rsa.PrivateKey
	mintURL *url.URL
}

// Kind is "github-app".
func (g *GitHubApp) Kind() string { return KindGitHubApp }

// Secrets is none: the private key never leaves the broker (it signs the
// JWT here), and the JWT goes only to the token endpoint, whose answers
// never reach a box.
func (g *GitHubApp) Secrets() []string { return nil }

func (g *GitHubApp) rotates() bool { return false }

// MintURL is the installation's access_tokens URL.
func (g *GitHubApp) MintURL() *url.URL { return g.mintURL }

// numericID is an id written as a JSON number or string; validate
// checks that it is digits.
type numericID string

func (n *numericID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*n = numericID(s)
		return nil
	}
	*n = numericID(b)
	return nil
}

func (n numericID) String() string { return string(n) }

// digitsRE is a numeric id as validate takes it.
var digitsRE = regexp.MustCompile(`^[0-9]{1,20}$`)

func (g *GitHubApp) validate() error {
	const k = KindGitHubApp
	f := fields{kind: k}
	for _, id := range []struct {
		field string
		v     numericID
		of    string
	}{{"app_id", g.AppID, "app"}, {"installation_id", g.InstallationID, "installation"}} {
		f.check(required(k, id.field, id.v.String()))
		f.want(digitsRE.MatchString(id.v.String()), id.field, "must be the "+id.of+"'s numeric id")
	}
	f.check(required(k, "private_key", g.PrivateKey))
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(g.PrivateKey))
	if err != nil {
		f.want(false, "private_key", "is not an RSA private key in PEM form (the .pem file GitHub gives for the app)")
	} else {
		f.want(key.N.BitLen() >= 2048, "private_key", "is an RSA key shorter than 2048 bits")
	}
	g.key = key
	for _, r := range g.Repositories {
		f.want(r != "" && !strings.ContainsAny(r, "/ \t\n"), "repositories", fmt.Sprintf("holds %q, which is not a repository name (the name alone, without its owner)", r))
	}
	for p, a := range g.Permissions {
		f.want(a == "read" || a == "write" || a == "admin", "permissions", fmt.Sprintf("gives %q the access %q; want read, write or admin", p, a))
	}
	api := g.APIURL
	if api == "" {
		api = DefaultGitHubAPI
	}
	base, err := pinnedURL(k, "api_url", api)
	f.check(err)
	if f.err != nil {
		return f.err
	}
	g.mintURL = base.JoinPath("app", "installations", g.InstallationID.String(), "access_tokens")
	return nil
}

// jwtLife is how long after it is made an app's JWT is valid.
const jwtLife = 9 * time.Minute

// jwt returns the app's JWT: issued a minute ago (for clock drift), valid
// for nine minutes more, as GitHub asks.
func (g *GitHubApp) jwt(now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{
		Issuer:    g.AppID.String(),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLife)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(g.key)
}

func (g *GitHubApp) mint(ctx context.Context, client *http.Client, now time.Time, _ string) (Token, error) {
	signed, err := g.jwt(now)
	if err != nil {
		return Token{}, fmt.Errorf("github-app: sign the app's JWT: %w", err)
	}
	var body []byte
	if len(g.Repositories) > 0 || len(g.Permissions) > 0 {
		body, _ = json.Marshal(struct {
			Repositories []string          `json:"repositories,omitempty"`
			Permissions  map[string]string `json:"permissions,omitempty"`
		}{g.Repositories, g.Permissions})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.mintURL.String(), bytes.NewReader(body))
	if err != nil {
		return Token{}, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("Authorization", "Bearer "+signed)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return Token{}, &UnreachableError{Kind: KindGitHubApp, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxMintAnswer))
	if err != nil {
		return Token{}, &UnreachableError{Kind: KindGitHubApp, Err: err}
	}
	if err := refusal(KindGitHubApp, resp.StatusCode, resp.Header, now, true, ""); err != nil {
		return Token{}, err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return Token{}, &UnreachableError{Kind: KindGitHubApp, Err: fmt.Errorf("GitHub answered %d", resp.StatusCode)}
	}
	var ans struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil || ans.Token == "" || ans.ExpiresAt.IsZero() {
		return Token{}, &UnreachableError{Kind: KindGitHubApp, Err: fmt.Errorf("GitHub's answer (%d bytes) holds no token and expires_at", len(raw))}
	}
	if err := headerSafe(KindGitHubApp, "token", ans.Token); err != nil {
		return Token{}, &UnreachableError{Kind: KindGitHubApp, Err: err}
	}
	// The JWT went only to the token endpoint; it is kept beside the
	// token until it expires, in case that is the secret's host too.
	return Token{Value: ans.Token, Expires: ans.ExpiresAt, sent: signed, sentUntil: now.Add(jwtLife)}, nil
}
