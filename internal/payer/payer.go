// Package payer decides, per request, whose credential pays for a box's
// model calls: the operator's shared credential, the box owner's own, or
// (with a valid chant-grant) a visitor's. It says the same payer on the
// declaration answer and on every model answer's chant-payer header.
package payer

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// Credential IDs in the store.
const (
	// SharedAnthropic is the operator's Anthropic credential.
	SharedAnthropic = "anthropic"
	// SharedFountain is the operator's Fountain key.
	SharedFountain = "fountain"
)

// OwnerAnthropic is the ID of a box owner's own Anthropic credential.
func OwnerAnthropic(box string) string { return "owner:" + box }

// VisitorAnthropic is the ID of a visitor's Anthropic credential.
func VisitorAnthropic(principal string) string { return "visitor:" + principal }

// AD is the additional data a credential with that ID is sealed with.
func AD(id string) string { return "credential:" + id }

// Resolver decides who pays. It is safe for concurrent use.
type Resolver struct {
	Cache   *cache.Cache
	Keyring *secrets.Keyring
}

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

// Func returns the capability.PayerFunc for a box's request.
func (p *Resolver) Func(b store.Box) capability.PayerFunc {
	return func(ctx context.Context, r *http.Request) (capability.Paid, error) {
		pay := p.ForBox(b)
		id := SharedAnthropic
		if pay.Kind == protocol.PayerOwner {
			id = OwnerAnthropic(b.Name)
		}
		cred, err := p.Open(ctx, id)
		if err != nil {
			return capability.Paid{Payer: pay}, err
		}
		return capability.Paid{Payer: pay, Credential: cred}, nil
	}
}

// Open returns the plaintext of the credential with that ID, or
// capability.ErrNoCredential when none is set.
func (p *Resolver) Open(ctx context.Context, id string) ([]byte, error) {
	c, err := p.Cache.Credential(ctx, id)
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
