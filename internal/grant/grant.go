// Package grant mints and judges the grants a broker issues to a visitor
// for one box, which the visitor's surface sends as the chant-grant header
// on that visitor's turns. A grant's value is shown once, when it is
// issued; the store keeps only its SHA-256 hash, its box, its principal,
// its expiry and its revocation. Package token mints and hashes the
// value.
//
// Issue mints and stores a grant; Check judges a stored grant against the
// box a request's token belongs to and the time. Who then pays is package
// payer's business.
package grant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// IDPrefix begins every grant ID. An ID names a grant in lists, logs and
// `grant revoke`; it is not secret and grants nothing.
const IDPrefix = "grt_"

// TTL bounds.
const (
	// DefaultTTL is a grant's lifetime when the issuer names none.
	DefaultTTL = 15 * time.Minute
	// MaxTTL is the longest lifetime a grant may be issued with: the
	// protocol asks brokers to keep grants short.
	MaxTTL = 24 * time.Hour
)

// Sentinel errors of Issue.
var (
	// ErrTTL: the lifetime is not positive or is over MaxTTL.
	ErrTTL = fmt.Errorf("a grant's lifetime must be more than 0 and at most %v", MaxTTL)
	// ErrPrincipal: the principal is not one (protocol.IsPrincipal).
	ErrPrincipal = errors.New("not a principal: 1 to 200 characters with no white space, such as github:<login>")
)

// newID returns a new grant ID: IDPrefix and 16 random lowercase hex
// digits. crypto/rand.Read never fails.
func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return IDPrefix + hex.EncodeToString(b)
}

// Issue mints a grant for principal on box, valid for ttl from now (0
// means DefaultTTL), stores its hash, and returns its value — the only time
// the value exists outside the visitor's hands — and the stored grant.
// It returns ErrTTL or ErrPrincipal for bad arguments, store.ErrNotFound
// when there is no such box, and the store's other errors.
func Issue(ctx context.Context, st store.Grants, box, principal string, ttl time.Duration, now time.Time) (string, store.Grant, error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < 0 || ttl > MaxTTL {
		return "", store.Grant{}, ErrTTL
	}
	if !protocol.IsPrincipal(principal) {
		return "", store.Grant{}, ErrPrincipal
	}
	value, err := token.NewGrant()
	if err != nil {
		return "", store.Grant{}, err
	}
	now = now.UTC()
	g := store.Grant{ID: newID(), Hash: token.Hash(value), Box: box, Principal: principal, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := st.CreateGrant(ctx, g); err != nil {
		return "", store.Grant{}, err
	}
	return value, g, nil
}

// Outcomes of judging a chant-grant header: Accepted, or the reason it is
// ignored. They are the label values of the grant counter.
const (
	Accepted = "accepted"
	// Malformed: not one value, or not printable ASCII with no spaces of at
	// most 2048 characters.
	Malformed = "malformed"
	// Unknown: no grant this broker issued has that value.
	Unknown = "unknown"
	// OtherBox: issued for a box other than the one whose token the
	// request carries.
	OtherBox = "other-box"
	// Expired: past its expiry.
	Expired = "expired"
	// Revoked: revoked.
	Revoked = "revoked"
	// NoCredential: the visitor holds no credential at the broker.
	NoCredential = "no-credential"
)

// Outcomes lists every outcome, Accepted first.
var Outcomes = []string{Accepted, Malformed, Unknown, OtherBox, Expired, Revoked, NoCredential}

// Check judges a stored grant for a request carrying box's token at now.
// It returns Accepted, OtherBox, Revoked or Expired (in that order of
// precedence after the box); whether the visitor holds a credential is the
// caller's to check. A grant with a zero ExpiresAt never expires.
func Check(g store.Grant, box string, now time.Time) string {
	switch {
	case g.Box != box:
		return OtherBox
	case !g.RevokedAt.IsZero():
		return Revoked
	case !g.ExpiresAt.IsZero() && !now.Before(g.ExpiresAt):
		return Expired
	}
	return Accepted
}
