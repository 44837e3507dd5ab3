// Package mint makes the values the broker sends for egress secrets of a
// kind other than a plain value: tokens it mints and caches (github-app,
// oauth2) and signatures it makes for each request (aws-sigv4, hmac).
//
// A secret's configuration is JSON, read by Parse into a Spec, which
// validates every field and names the one at fault. A Minted spec's
// tokens are had through a Minter, which caches each until shortly
// before it expires, makes one mint for any number of concurrent calls,
// keeps a rotated refresh token (sealed) and a refusal in the store, and
// sends minting requests only to the spec's pinned https URL. A Signer
// spec signs each outbound request itself.
//
// No value a spec holds or makes is ever put in an error's text.
package mint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/intentius/boxbroker/internal/protocol"
)

// The kinds of secret this package makes values for. A secret of kind ""
// is a plain value, sent as it is.
const (
	KindGitHubApp = "github-app"
	KindOAuth2    = "oauth2"
	KindSigV4     = "aws-sigv4"
	KindHMAC      = "hmac"
)

// Kinds returns every kind Parse takes, for usage messages.
func Kinds() []string { return []string{KindGitHubApp, KindOAuth2, KindSigV4, KindHMAC} }

// maxConfig bounds a secret's configuration.
const maxConfig = 64 << 10

// Spec is a secret's configuration, parsed and validated.
type Spec interface {
	// Kind is the spec's kind.
	Kind() string
	// Secrets returns the configuration's own secret values (keys, client
	// secrets, refresh tokens), which no answer to a box may carry.
	Secrets() []string
}

// Minted is a Spec whose value is a token the broker mints: github-app
// and oauth2. Its tokens are had through a Minter.
type Minted interface {
	Spec
	// MintURL is the one URL minting requests go to.
	MintURL() *url.URL
	// mint makes a token, with refresh the refresh token to use ("" for
	// the configuration's own).
	mint(ctx context.Context, client *http.Client, now time.Time, refresh string) (Token, error)
	// rotates reports whether mint uses a refresh token the endpoint
	// may rotate, which the Minter keeps.
	rotates() bool
}

// Signer is a Spec that signs each outbound request: aws-sigv4 and hmac.
type Signer interface {
	Spec
	// Unsigned reports whether a body the broker does not read whole (of
	// unknown length, or longer than it reads) may be sent unsigned.
	Unsigned() bool
	// Drop returns the request headers a box's own signature may be in,
	// removed before the broker signs.
	Drop() []string
	// Sign signs req, whose body is body, or, when unsigned is true, a
	// body sent unsigned. It returns the values it made (signatures and
	// the headers holding them), which no answer to a box may carry.
	Sign(ctx context.Context, req *http.Request, body []byte, unsigned bool, now time.Time) ([]string, error)
	// Life is how long after it was made the host may take a request with
	// a signature Sign made; zero when for ever.
	Life() time.Duration
}

// FieldError is a configuration refused: Field names the member at
// fault, Problem says what is wrong with it.
type FieldError struct {
	Kind, Field, Problem string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s configuration: %q %s", e.Kind, e.Field, e.Problem)
}

// Parse reads a secret's configuration of the given kind, JSON, and
// validates it. It returns a *FieldError naming the member at fault, or
// an error for a kind it does not know. A member it does not know is
// refused, so that a misspelt optional one is not silently left out.
func Parse(kind string, config []byte) (Spec, error) {
	var s interface {
		Spec
		validate() error
	}
	switch kind {
	case KindGitHubApp:
		s = &GitHubApp{}
	case KindOAuth2:
		s = &OAuth2{}
	case KindSigV4:
		s = &SigV4{}
	case KindHMAC:
		s = &HMAC{}
	default:
		return nil, fmt.Errorf("unknown kind %q (want one of %s)", kind, strings.Join(Kinds(), ", "))
	}
	if len(config) > maxConfig {
		return nil, &FieldError{Kind: kind, Field: "(configuration)", Problem: fmt.Sprintf("is over %d bytes", maxConfig)}
	}
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return nil, decodeError(kind, err)
	}
	if dec.More() {
		return nil, &FieldError{Kind: kind, Field: "(configuration)", Problem: "holds more than one JSON object"}
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeError names the member a decoding error is about, without the
// value (which may be a key).
func decodeError(kind string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &FieldError{Kind: kind, Field: te.Field, Problem: "must be a JSON " + jsonType(te.Type.Kind().String()) + ", not " + te.Value}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &FieldError{Kind: kind, Field: strings.Trim(f, `"`), Problem: "is not a member of this kind's configuration"}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FieldError{Kind: kind, Field: "(configuration)", Problem: "is not one JSON object (read from stdin)"}
	}
	return &FieldError{Kind: kind, Field: "(configuration)", Problem: "is not a JSON object of this kind's members"}
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "slice":
		return "array"
	case "map", "struct":
		return "object"
	case "bool":
		return "boolean"
	}
	return "value"
}

// fields keeps the first *FieldError of a configuration's checks, made in
// turn: once one has failed, the later ones are not reported.
type fields struct {
	kind string
	err  error
}

// check keeps err when no earlier check failed.
func (f *fields) check(err error) {
	if f.err == nil {
		f.err = err
	}
}

// want fails field with problem unless ok.
func (f *fields) want(ok bool, field, problem string) {
	if !ok {
		f.check(&FieldError{Kind: f.kind, Field: field, Problem: problem})
	}
}

// required reports a *FieldError for an empty member.
func required(kind, field, v string) error {
	if strings.TrimSpace(v) == "" {
		return &FieldError{Kind: kind, Field: field, Problem: "is missing"}
	}
	return nil
}

// headerSafe reports a *FieldError for a value that cannot travel in a
// header: a control character.
func headerSafe(kind, field, v string) error {
	for _, b := range []byte(v) {
		if b < 0x20 || b == 0x7f {
			return &FieldError{Kind: kind, Field: field, Problem: "holds a control character"}
		}
	}
	return nil
}

// oneOf reports a *FieldError unless *v is one of allowed; an empty *v
// becomes def ("" keeps it empty).
func oneOf(kind, field string, v *string, def string, allowed ...string) error {
	if *v == "" {
		*v = def
		return nil
	}
	if slices.Contains(allowed, *v) {
		return nil
	}
	last := len(allowed) - 1
	return &FieldError{Kind: kind, Field: field, Problem: "must be " + strings.Join(allowed[:last], ", ") + " or " + allowed[last]}
}

// headerName reports a *FieldError for a value that is not a header
// name, and makes *v canonical.
func headerName(kind, field string, v *string) error {
	if !httpguts.ValidHeaderFieldName(*v) {
		return &FieldError{Kind: kind, Field: field, Problem: "is not a header name"}
	}
	*v = textproto.CanonicalMIMEHeaderKey(*v)
	return nil
}

// pinnedURL parses a URL minting requests go to: https only, validated
// as a secret's host is, and returned whole (its path kept).
func pinnedURL(kind, field, s string) (*url.URL, error) {
	if !strings.HasPrefix(s, "https://") {
		return nil, &FieldError{Kind: kind, Field: field, Problem: "must be an https:// URL"}
	}
	if _, err := protocol.ParseSecretHost(s); err != nil {
		return nil, &FieldError{Kind: kind, Field: field, Problem: "is not a usable URL: " + err.Error()}
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, &FieldError{Kind: kind, Field: field, Problem: "is not a URL"}
	}
	return u, nil
}
