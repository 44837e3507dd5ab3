// Package token mints, hashes, reads and looks up boxbroker's tokens,
// and holds their shape once: every other package that recognises a
// token (the scrubber of what goes upstream, egress's search of a
// request) takes Prefixes, BodyLen, Len and IsBodyByte from here.
// There are three kinds, each its prefix followed by 32 random bytes in
// unpadded base64url (BodyLen, 43 characters):
//
//   - a box token, "bbx_…", which a box sends as Authorization: Bearer or
//     x-api-key on every request;
//   - an admin token, "bba_…", which the admin API takes as
//     Authorization: Bearer;
//   - a grant, "bbg_…", which a visitor's surface sends as the chant-grant
//     header on that visitor's turns.
//
// The prefix makes a token recognisable in a request and in a leaked log,
// and keeps one kind from being mistaken for another. A token's value is
// shown once, when it is minted; only its SHA-256 hash, in lower-case hex,
// is stored, and the store is read by that hash. Lookup compares the
// stored hash with the one computed in constant time (crypto/subtle).
package token

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/store"
)

// The prefixes that begin each kind of token. Each is three letters and
// "_", and no two end in the same letter.
const (
	// BoxPrefix begins every box token.
	BoxPrefix = "bbx_"
	// AdminPrefix begins every admin token.
	AdminPrefix = "bba_"
	// GrantPrefix begins every grant value.
	GrantPrefix = "bbg_"
)

// Prefixes returns the three prefixes: box, grant, admin.
func Prefixes() [3]string { return [...]string{BoxPrefix, GrantPrefix, AdminPrefix} }

// The shape of a token: its prefix, then BodyLen base64url characters
// (see IsBodyByte) that spell randomBytes random bytes, unpadded.
const (
	randomBytes = 32
	// BodyLen is the number of characters after a token's prefix.
	BodyLen = (randomBytes*8 + 5) / 6
	// Len is the length of a token of any kind, its prefix included.
	Len = len(BoxPrefix) + BodyLen
)

// IsBodyByte reports whether c may stand after a token's prefix: a
// base64url character (A-Z, a-z, 0-9, '-' and '_').
func IsBodyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// Body is tok's random part, after its prefix (tok itself when it has
// none of Prefixes): what a search for the token looks for, since its
// first byte is as likely as any other and the prefix's are common, so
// the search stops less often to compare.
func Body(tok string) string {
	for _, p := range Prefixes() {
		if b, ok := strings.CutPrefix(tok, p); ok {
			return b
		}
	}
	return tok
}

// AppendFound appends to dst every run in s of prefix followed by at
// least BodyLen characters IsBodyByte takes, each whole (a run longer
// than a token is appended whole, and is no token), searched from the
// left, none overlapping; it returns dst unchanged when there is none.
func AppendFound(dst []string, s, prefix string) []string {
	for {
		i := strings.Index(s, prefix)
		if i < 0 {
			return dst
		}
		j := i + len(prefix)
		for j < len(s) && IsBodyByte(s[j]) {
			j++
		}
		if j-i-len(prefix) >= BodyLen {
			dst = append(dst, s[i:j])
			s = s[j:]
		} else {
			s = s[i+1:]
		}
	}
}

// Sentinel errors of FromRequest, FromRoute, One and Lookup. Their
// messages never hold a token.
var (
	// ErrMissing: the request carries no token.
	ErrMissing = errors.New("no token")
	// ErrConflict: the request carries two different tokens.
	ErrConflict = errors.New("two different tokens")
	// ErrUnknown: no stored token has the token's hash.
	ErrUnknown = errors.New("unknown token")
)

// Refused reports whether err is one of ErrMissing, ErrConflict and
// ErrUnknown: the request's token is at fault, not the store, so the
// answer is a refusal rather than a 503.
func Refused(err error) bool {
	return errors.Is(err, ErrMissing) || errors.Is(err, ErrConflict) || errors.Is(err, ErrUnknown)
}

// NewBox mints a box token: BoxPrefix and 32 random bytes, base64url.
// It returns an error only when the system's random source fails.
func NewBox() (string, error) { return mint(BoxPrefix, "token") }

// NewAdmin mints an admin token: AdminPrefix and 32 random bytes,
// base64url. It returns an error only when the system's random source
// fails.
func NewAdmin() (string, error) { return mint(AdminPrefix, "admin token") }

// NewGrant mints a grant value: GrantPrefix and 32 random bytes,
// base64url. It is printable ASCII with no spaces, well under
// protocol.MaxGrantLen. It returns an error only when the system's random
// source fails.
func NewGrant() (string, error) { return mint(GrantPrefix, "grant") }

func mint(prefix, what string) (string, error) {
	b := make([]byte, randomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("mint %s: %w", what, err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Hash is the SHA-256 of a token of any kind, in lower-case hex: the only
// form a token is stored in.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// ShortHash is the first 12 hex digits of Hash(token): enough to tell
// tokens apart in a log, and nothing an attacker can use.
func ShortHash(token string) string { return Hash(token)[:12] }

// Lookup returns the record stored under token's hash: it reads it with
// byHash and compares the record's hash, hashOf(record), with token's in
// constant time. It returns ErrMissing when token is "", ErrUnknown when
// byHash returns store.ErrNotFound or the hashes differ, and byHash's
// other errors as they are.
func Lookup[T any](ctx context.Context, token string, byHash func(context.Context, string) (T, error), hashOf func(T) string) (T, error) {
	rec, _, err := LookupEither(ctx, token, byHash, func(rec T) (string, string) { return hashOf(rec), "" })
	return rec, err
}

// LookupEither is Lookup for a record kept under two hashes (a box's
// token and, through a rotation's grace, its old one): hashesOf returns
// them ("" for none), both are compared with token's in constant time,
// and second is true when token is the second's.
func LookupEither[T any](ctx context.Context, token string, byHash func(context.Context, string) (T, error), hashesOf func(T) (string, string)) (rec T, second bool, err error) {
	var zero T
	if token == "" {
		return zero, false, ErrMissing
	}
	hash := Hash(token)
	rec, err = byHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return zero, false, ErrUnknown
	}
	if err != nil {
		return zero, false, err
	}
	// The read was by hash; compare in constant time all the same.
	a, b := hashesOf(rec)
	first := subtle.ConstantTimeCompare([]byte(a), []byte(hash)) == 1
	second = b != "" && subtle.ConstantTimeCompare([]byte(b), []byte(hash)) == 1
	if !first && !second {
		return zero, false, ErrUnknown
	}
	return rec, !first, nil
}

// FromRequest reads a box's token from r: every Authorization value of
// the Bearer scheme (in any case) and every X-Api-Key value, each trimmed
// of surrounding white space, empty ones skipped. It returns the one
// distinct token they hold, ErrMissing when there is none, and ErrConflict
// when they hold two different ones.
func FromRequest(r *http.Request) (string, error) {
	return FromRoute(r, nil)
}

// FromRoute reads a box's token from r on a route that may take it
// elsewhere than FromRequest reads one: find, when not nil, returns every
// candidate r carries (the route's capability.Route.Tokens); nil, those
// FromRequest reads. handed are tokens another front door read for r
// before handing it in (the HTTPS proxy's), which r's own must equal. It
// returns the one distinct token among them all, ErrMissing when there is
// none, and ErrConflict when two differ.
func FromRoute(r *http.Request, find func(*http.Request) []string, handed ...string) (string, error) {
	var buf [2]string // room for the usual one token, without allocating
	var found []string
	if find != nil {
		found = find(r)
	} else {
		found = AppendSent(buf[:0], r.Header)
	}
	return One(append(found, handed...))
}

// AppendSent appends to dst every token h carries where FromRequest reads
// one: each non-empty Authorization: Bearer value, then each non-empty
// X-Api-Key value, trimmed; it returns dst unchanged when there is none.
func AppendSent(dst []string, h http.Header) []string {
	for _, v := range h.Values("Authorization") {
		if t, ok := cutBearer(v); ok && t != "" {
			dst = append(dst, t)
		}
	}
	for _, v := range h.Values("X-Api-Key") {
		if v = strings.TrimSpace(v); v != "" {
			dst = append(dst, v)
		}
	}
	return dst
}

// One returns the single distinct token in found: ErrMissing when found is
// empty, ErrConflict when it holds two different tokens.
func One(found []string) (string, error) {
	if len(found) == 0 {
		return "", ErrMissing
	}
	for _, t := range found[1:] {
		if t != found[0] {
			return "", ErrConflict
		}
	}
	return found[0], nil
}

// Bearer reads the admin API's token from h: the first Authorization
// value, when it is of the Bearer scheme (in any case), trimmed of
// surrounding white space; "" when there is none.
func Bearer(h http.Header) string {
	t, _ := cutBearer(h.Get("Authorization"))
	return t
}

// FromProxyAuthorization reads a box's token from Proxy-Authorization,
// as the egress proxy takes it: the password of Basic credentials (the
// user when the password is empty), or a Bearer token; "" when there is
// none.
func FromProxyAuthorization(h http.Header) string {
	v := h.Get("Proxy-Authorization")
	if dec, ok := BasicCredentials(v); ok {
		user, pass, _ := strings.Cut(dec, ":")
		if pass == "" {
			return user
		}
		return pass
	}
	t, _ := cutBearer(strings.TrimSpace(v))
	return t
}

// cutBearer returns the credentials of an Authorization value of the
// Bearer scheme, trimmed; ok is false for any other value.
func cutBearer(v string) (t string, ok bool) {
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return "", false
	}
	return strings.TrimSpace(v[7:]), true
}

// RedactPath is path as a log line may hold it: with every box token,
// grant and admin token in it (as an egress box may put one where an API
// puts its key, or any box where an id goes) cut to its prefix and "…".
func RedactPath(path string) string {
	if !strings.Contains(path, BoxPrefix) && !strings.Contains(path, GrantPrefix) && !strings.Contains(path, AdminPrefix) {
		return path
	}
	var b strings.Builder
	for {
		i, n := -1, 0
		for _, p := range Prefixes() {
			if j := strings.Index(path, p); j >= 0 && (i < 0 || j < i) {
				i, n = j, len(p)
			}
		}
		if i < 0 {
			break
		}
		b.WriteString(path[:i+n] + "…")
		path = path[i+n:]
		j := 0
		for j < len(path) && IsBodyByte(path[j]) {
			j++
		}
		path = path[j:]
	}
	b.WriteString(path)
	return b.String()
}

// BasicCredentials decodes an Authorization (or Proxy-Authorization)
// value of the Basic scheme to "user:password", as sent: a box may put
// its token as the user or the password.
func BasicCredentials(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(dec), true
}
