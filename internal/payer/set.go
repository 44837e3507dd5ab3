package payer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// Choice is who is to pay for a box's model calls when no grant applies:
// Kind protocol.PayerShared, or protocol.PayerOwner with the owner's
// Principal ("" when not named) and Credential, the owner's Anthropic API
// key or setup token in plaintext.
type Choice struct {
	Kind       string
	Principal  string
	Credential []byte
}

// Change is what Set did: the box as it now stands, and whether it stored
// the owner's credential or removed one.
type Change struct {
	Box               store.Box
	CredentialSet     bool
	CredentialRemoved bool
}

// Sentinel errors of Set, for a Choice that is not one. Their messages
// never hold a credential.
var (
	// ErrKind: the kind is neither shared nor owner.
	ErrKind = errors.New("a box's payer is shared or owner")
	// ErrPrincipal: the principal is not one (protocol.IsPrincipal).
	ErrPrincipal = errors.New("the owner's principal is 1 to 200 characters with no white space, such as github:<login>")
	// ErrSharedPrincipal: a shared payer was given a principal.
	ErrSharedPrincipal = errors.New("a shared payer names no principal; only an owner does")
	// ErrOwnerCredential: an owner payer was given no credential.
	ErrOwnerCredential = errors.New("an owner payer needs the owner's Anthropic key or setup token")
)

// SetStore is the part of the store Set writes.
type SetStore interface {
	store.Boxes
	store.Credentials
}

// Set makes c the payer of the box named box; it is what `boxbroker box
// payer` and the admin API's PUT /api/boxes/{name}/payer both call. For
// an owner it seals and stores the owner's credential (as
// OwnerAnthropic(box)) before it changes the box, so the box is never
// owner-paid with no credential; for shared it changes the box and then
// removes the owner's credential, which is the box's alone.
//
// It returns ErrKind, ErrPrincipal, ErrSharedPrincipal or
// ErrOwnerCredential for a bad Choice, store.ErrNotFound when there is no
// such box, and the store's or keyring's other errors. Set neither reads
// nor clears c.Credential after it returns; the caller clears it.
//
// A running broker reads a box's payer and the owner's credential through
// its cache: the caller tells a cache of its own what changed
// (store.ChangeBox with the box, store.ChangeCredential with
// OwnerAnthropic(box)); other processes see it from the change log.
func Set(ctx context.Context, st SetStore, keyring *secrets.Keyring, box string, c Choice, now time.Time) (Change, error) {
	switch {
	case c.Kind != protocol.PayerShared && c.Kind != protocol.PayerOwner:
		return Change{}, ErrKind
	case c.Kind == protocol.PayerShared && c.Principal != "":
		return Change{}, ErrSharedPrincipal
	case c.Principal != "" && !protocol.IsPrincipal(c.Principal):
		return Change{}, ErrPrincipal
	case c.Kind == protocol.PayerOwner && len(c.Credential) == 0:
		return Change{}, ErrOwnerCredential
	}
	// The box must be there before its owner's credential is stored.
	if _, err := st.Box(ctx, box); err != nil {
		return Change{}, err
	}
	var ch Change
	id := OwnerAnthropic(box)
	if c.Kind == protocol.PayerOwner {
		sealed, err := keyring.Seal(c.Credential, AD(id))
		if err != nil {
			return Change{}, fmt.Errorf("seal %s: %w", id, err)
		}
		if err := st.SetCredential(ctx, store.Credential{ID: id, Sealed: sealed, UpdatedAt: now.UTC()}); err != nil {
			return Change{}, err
		}
		ch.CredentialSet = true
	}
	// The payer alone is written: a pause or consent changed meanwhile
	// stands.
	if err := st.ChangeBox(ctx, box, store.BoxChange{PayerKind: &c.Kind, PayerPrincipal: c.Principal}); err != nil {
		return ch, err
	}
	b, err := st.Box(ctx, box)
	if err != nil {
		return ch, err
	}
	ch.Box = b
	if c.Kind == protocol.PayerShared {
		err := st.DeleteCredential(ctx, id)
		switch {
		case err == nil:
			ch.CredentialRemoved = true
		case !errors.Is(err, store.ErrNotFound):
			return ch, fmt.Errorf("the box is now shared-paid, but its owner's credential could not be removed: %w", err)
		}
	}
	return ch, nil
}
