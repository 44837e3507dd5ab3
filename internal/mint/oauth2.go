package mint

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuth2 grants.
const (
	GrantRefreshToken      = "refresh_token"
	GrantClientCredentials = "client_credentials"
)

// OAuth2 is an oauth2 secret: a token endpoint, a client, and either a
// refresh token or the client-credentials grant. The broker fetches
// access tokens with golang.org/x/oauth2 and keeps the refresh token the
// endpoint rotates to.
type OAuth2 struct {
	TokenURL     string `json:"token_url"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// RefreshToken is the grant's refresh token; required for the
	// refresh_token grant.
	RefreshToken string `json:"refresh_token,omitempty"`
	// Grant is "refresh_token" (the default when RefreshToken is set) or
	// "client_credentials" (the default otherwise).
	Grant  string   `json:"grant,omitempty"`
	Scopes []string `json:"scopes,omitempty"`
	// AuthStyle is how the client authenticates to the endpoint: "basic"
	// (HTTP Basic, the default) or "body" (client_id and client_secret
	// in the form).
	AuthStyle string `json:"auth_style,omitempty"`

	mintURL *url.URL
}

// Kind is "oauth2".
func (o *OAuth2) Kind() string { return KindOAuth2 }

// Secrets are the client secret and the refresh token.
func (o *OAuth2) Secrets() []string { return []string{o.ClientSecret, o.RefreshToken} }

func (o *OAuth2) rotates() bool { return o.Grant == GrantRefreshToken }

// MintURL is the token endpoint.
func (o *OAuth2) MintURL() *url.URL { return o.mintURL }

var scopeRE = regexp.MustCompile(`^[\x21\x23-\x5b\x5d-\x7e]+$`)

func (o *OAuth2) validate() error {
	const k = KindOAuth2
	f := fields{kind: k}
	f.check(required(k, "token_url", o.TokenURL))
	u, err := pinnedURL(k, "token_url", o.TokenURL)
	f.check(err)
	o.mintURL = u
	f.check(required(k, "client_id", o.ClientID))
	f.check(headerSafe(k, "client_id", o.ClientID))
	f.check(headerSafe(k, "client_secret", o.ClientSecret))
	f.check(headerSafe(k, "refresh_token", o.RefreshToken))
	if o.Grant == "" {
		o.Grant = GrantClientCredentials
		if o.RefreshToken != "" {
			o.Grant = GrantRefreshToken
		}
	}
	switch o.Grant {
	case GrantRefreshToken:
		f.check(required(k, "refresh_token", o.RefreshToken))
	case GrantClientCredentials:
		f.check(required(k, "client_secret", o.ClientSecret))
	default:
		f.want(false, "grant", "must be refresh_token or client_credentials")
	}
	f.check(oneOf(k, "auth_style", &o.AuthStyle, "", "basic", "body"))
	for _, s := range o.Scopes {
		f.want(scopeRE.MatchString(s), "scopes", "holds a scope with a space, quote, backslash or control character")
	}
	return f.err
}

// errNotAToken is a token endpoint's 2xx answer that golang.org/x/oauth2
// could not read as a token.
var errNotAToken = errors.New("the token endpoint's answer is not a token the broker can read (JSON or a form with access_token)")

func (o *OAuth2) style() oauth2.AuthStyle {
	if o.AuthStyle == "body" {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

func (o *OAuth2) mint(ctx context.Context, client *http.Client, now time.Time, refresh string) (Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	var (
		tok *oauth2.Token
		err error
	)
	if o.Grant == GrantClientCredentials {
		cc := clientcredentials.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL,
			Scopes: o.Scopes, AuthStyle: o.style()}
		tok, err = cc.Token(ctx)
	} else {
		if refresh == "" {
			refresh = o.RefreshToken
		}
		c := oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes,
			Endpoint: oauth2.Endpoint{TokenURL: o.TokenURL, AuthStyle: o.style()}}
		tok, err = c.TokenSource(ctx, &oauth2.Token{RefreshToken: refresh, Expiry: now.Add(-time.Hour)}).Token()
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status, h := 0, http.Header(nil)
		if re.Response != nil {
			status, h = re.Response.StatusCode, re.Response.Header
		}
		if status >= 200 && status < 300 && re.ErrorCode != "" {
			// RFC 6749 §5.2's error answer, sent with a 2xx as some
			// endpoints do (golang.org/x/oauth2 gives it as an error for
			// its error field): the refusal it is, as the 400 the RFC
			// gives it, in the same words.
			status = http.StatusBadRequest
		}
		if err := refusal(KindOAuth2, status, h, now, false, re.ErrorCode, o.ClientSecret, refresh); err != nil {
			return Token{}, err
		}
		return Token{}, &UnreachableError{Kind: KindOAuth2, Err: statusError(status)}
	}
	if err != nil {
		var ue *url.Error
		if !errors.As(err, &ue) {
			// Not the transport's (quiet.Errors rewords those): one of
			// oauth2's own, which quote the endpoint's answer, and so
			// whatever of the request it repeated there (the client's
			// Basic credentials, the form with the refresh token in it)
			// in any encoding.
			err = errNotAToken
		}
		return Token{}, &UnreachableError{Kind: KindOAuth2, Err: scrubbed(err, o.ClientSecret, refresh)}
	}
	if tok.AccessToken == "" {
		return Token{}, &UnreachableError{Kind: KindOAuth2, Err: errors.New("the token endpoint's answer holds no access_token")}
	}
	if err := headerSafe(KindOAuth2, "access_token", tok.AccessToken); err != nil {
		return Token{}, &UnreachableError{Kind: KindOAuth2, Err: err}
	}
	t := Token{Value: tok.AccessToken, Expires: tok.Expiry}
	if o.Grant == GrantRefreshToken {
		if tok.RefreshToken != "" {
			t.Refresh = tok.RefreshToken
		}
		// The refresh token went only to the token endpoint; it is kept
		// beside the token, in case that is the secret's host's server
		// too. How long it works is not known.
		t.sent, t.sentUntil = refresh, now.Add(keptUnknown)
	}
	return t, nil
}
