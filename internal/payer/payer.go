// Package payer decides, per request, whose credential pays for a box's
// model calls: the operator's shared credential, the box owner's own, or
// (with a valid chant-grant) a visitor's. It says the same payer on the
// declaration answer and on every model answer's chant-payer header.
//
// A box's payer and the shared and owner credentials are read through the
// cache, so a change made by another process is seen once the cache has
// polled the store's change log. A grant, and the credential of the visitor
// it names, are read from the store itself on every request that carries
// one: a revocation, an expiry or a removed credential takes effect at the
// very next request on every replica.
package payer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// Credential IDs in the store.
const (
	// SharedAnthropic is the operator's Anthropic credential.
	SharedAnthropic = pool.SharedID
	// SharedFountain is the operator's Fountain key.
	SharedFountain = "fountain"
)

// OwnerAnthropic is the ID of a box owner's own Anthropic credential.
func OwnerAnthropic(box string) string { return "owner:" + box }

// VisitorAnthropic is the ID of a visitor's Anthropic credential.
func VisitorAnthropic(principal string) string { return "visitor:" + principal }

// VisitorPrefix begins the ID of every visitor's credential.
const VisitorPrefix = "visitor:"

// AD is the additional data a credential with that ID is sealed with.
func AD(id string) string { return "credential:" + id }

// Resolver decides who pays. Its exported fields are set before first use
// and not changed after; its methods are safe for concurrent use.
type Resolver struct {
	// Cache reads boxes' payers and the shared and owner credentials.
	Cache *cache.Cache
	// Keyring opens sealed credentials.
	Keyring *secrets.Keyring
	// Pool, when set, is the operator's credential pool, which pays for
	// a shared payer's calls: the shared credential is its entry
	// pool.Default. Nil pays them with the shared credential alone.
	Pool *pool.Pool
	// Store is read for grants and visitors' credentials on every request
	// that carries a grant. Nil honours no grant: each is ignored as
	// unknown.
	Store store.Store
	// Logger receives one line per grant checked, never its value (nil:
	// slog.Default()).
	Logger *slog.Logger
	// Now is the clock grants expire by (nil: time.Now).
	Now func() time.Time
	// OnGrant, when set, is called with the outcome of every chant-grant
	// header checked (one of grant.Outcomes, or Unavailable), for metrics.
	// It must be quick and safe for concurrent use.
	OnGrant func(outcome string)

	counts [len(outcomes)]atomic.Int64 // by index in outcomes
}

// outcomes are the outcomes counted: grant.Outcomes, then Unavailable.
var outcomes = [...]string{grant.Accepted, grant.Malformed, grant.Unknown, grant.OtherBox,
	grant.Expired, grant.Revoked, grant.NoCredential, Unavailable}

// Unavailable is the outcome of a grant that could not be checked because
// the store did not answer; the request is refused with a 503 rather than
// paid by anyone.
const Unavailable = "unavailable"

// ForBox is the payer a box's requests are paid by when no grant applies.
func (p *Resolver) ForBox(b store.Box) protocol.Payer {
	if b.PayerKind == protocol.PayerOwner {
		pay := protocol.Payer{Kind: protocol.PayerOwner}
		if b.PayerPrincipal != "" {
			principal := b.PayerPrincipal
			pay.Principal = &principal
		}
		return pay
	}
	return protocol.SharedPayer()
}

// Func returns the capability.PayerFunc for a box's request admitted with
// the token that hashes to tokenHash. A request carrying a chant-grant
// that passes every check is paid by the grant's visitor; any other is
// paid as ForBox says, an owner's credential read only while the box
// holds that token (store.Credentials.CredentialOfToken): a request of a
// box removed since, and another added under its name, is not paid with
// the new box's owner's key.
func (p *Resolver) Func(b store.Box, tokenHash string) capability.PayerFunc {
	return func(ctx context.Context, r *http.Request) (capability.Paid, error) {
		pay := p.ForBox(b)
		if vals := r.Header.Values(protocol.HeaderGrant); len(vals) > 0 {
			paid, ok, err := p.visitor(ctx, b, vals)
			if err != nil {
				return capability.Paid{Payer: pay}, err
			}
			if ok {
				return paid, nil
			}
		}
		var cred []byte
		var err error
		switch {
		case pay.Kind == protocol.PayerOwner:
			id := OwnerAnthropic(b.Name)
			cred, err = p.open(id, func() (store.Credential, error) { return p.Cache.CredentialOfToken(ctx, id, b.Name, tokenHash) })
		case p.Pool != nil:
			return p.Pool.Choose(ctx, b.Name, pay)
		default:
			cred, err = p.Open(ctx, SharedAnthropic)
		}
		if err != nil {
			return capability.Paid{Payer: pay}, err
		}
		return capability.Paid{Payer: pay, Credential: cred}, nil
	}
}

// visitor checks the chant-grant values vals for box b. It returns ok
// false for a grant that fails a check (logged and counted), and an error
// only when the store or keyring fails.
func (p *Resolver) visitor(ctx context.Context, b store.Box, vals []string) (capability.Paid, bool, error) {
	if len(vals) != 1 || !protocol.IsGrantValue(vals[0]) {
		p.ignore(b, grant.Malformed, "values", len(vals))
		return capability.Paid{}, false, nil
	}
	value := vals[0]
	if p.Store == nil {
		p.ignore(b, grant.Unknown, "grant_hash", token.ShortHash(value))
		return capability.Paid{}, false, nil
	}
	g, err := token.Lookup(ctx, value, p.Store.GrantByHash, func(g store.Grant) string { return g.Hash })
	if errors.Is(err, token.ErrUnknown) {
		p.ignore(b, grant.Unknown, "grant_hash", token.ShortHash(value))
		return capability.Paid{}, false, nil
	}
	if err != nil {
		p.count(Unavailable)
		return capability.Paid{}, false, fmt.Errorf("read grant: %w", err)
	}
	if outcome := grant.Check(g, b.Name, p.now()); outcome != grant.Accepted {
		p.ignore(b, outcome, "grant", g.ID, "principal", g.Principal)
		return capability.Paid{}, false, nil
	}
	id := VisitorAnthropic(g.Principal)
	c, err := p.Store.Credential(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		p.ignore(b, grant.NoCredential, "grant", g.ID, "principal", g.Principal)
		return capability.Paid{}, false, nil
	}
	if err != nil {
		p.count(Unavailable)
		return capability.Paid{}, false, fmt.Errorf("read visitor credential: %w", err)
	}
	cred, err := p.Keyring.Open(c.Sealed, AD(id))
	if err != nil {
		p.count(Unavailable)
		return capability.Paid{}, false, fmt.Errorf("credential %s: %w", id, err)
	}
	p.count(grant.Accepted)
	p.logger().Info("grant accepted", "box", b.Name, "grant", g.ID, "principal", g.Principal)
	principal := g.Principal
	return capability.Paid{Payer: protocol.Payer{Kind: protocol.PayerVisitor, Principal: &principal}, Credential: cred}, true, nil
}

// ignore logs and counts a grant that failed a check. attrs never hold the
// grant's value.
func (p *Resolver) ignore(b store.Box, outcome string, attrs ...any) {
	p.count(outcome)
	p.logger().Warn("grant ignored", append([]any{"box", b.Name, "reason", outcome}, attrs...)...)
}

func (p *Resolver) count(outcome string) {
	if i := slices.Index(outcomes[:], outcome); i >= 0 {
		p.counts[i].Add(1)
	}
	if p.OnGrant != nil {
		p.OnGrant(outcome)
	}
}

// GrantCounts returns how many chant-grant headers have been checked since
// the Resolver was made, by outcome (every outcome present, zero or not).
func (p *Resolver) GrantCounts() map[string]int64 {
	out := make(map[string]int64, len(outcomes))
	for i, o := range outcomes {
		out[o] = p.counts[i].Load()
	}
	return out
}

func (p *Resolver) logger() *slog.Logger { return cmp.Or(p.Logger, slog.Default()) }

func (p *Resolver) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// SetHint is the command with which the operator sets the credential of
// box's payer pay, for the refusal when none is set.
func SetHint(pay protocol.Payer, box string) string {
	switch pay.Kind {
	case protocol.PayerOwner:
		return "`boxbroker box payer " + box + " owner`"
	case protocol.PayerVisitor:
		if pay.Principal != nil {
			return "`boxbroker visitor set " + *pay.Principal + "`"
		}
		return "`boxbroker visitor set PRINCIPAL`"
	}
	return "`boxbroker credential set anthropic`"
}

// Open returns the plaintext of the credential with that ID, or
// capability.ErrNoCredential when none is set.
func (p *Resolver) Open(ctx context.Context, id string) ([]byte, error) {
	return p.open(id, func() (store.Credential, error) { return p.Cache.Credential(ctx, id) })
}

// open returns the plaintext of the credential with that ID that read
// reads, or capability.ErrNoCredential when none is.
func (p *Resolver) open(id string, read func() (store.Credential, error)) ([]byte, error) {
	c, err := read()
	if errors.Is(err, store.ErrNotFound) {
		return nil, capability.ErrNoCredential
	}
	if err != nil {
		return nil, err
	}
	pt, err := p.Keyring.Open(c.Sealed, AD(id))
	if err != nil {
		return nil, fmt.Errorf("credential %s: %w", id, err)
	}
	return pt, nil
}
