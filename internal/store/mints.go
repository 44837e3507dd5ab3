package store

import (
	"context"
	"time"
)

// MintState is what the broker keeps of a minted secret (a secret whose
// Kind is not "") between mints: the refresh token the token endpoint
// rotated to, sealed, the expiry of the last token minted, and why the
// last mint was refused. It belongs to one configuration of the secret,
// named by Of; setting the secret again leaves the old state unread.
type MintState struct {
	Box  string
	Name string
	// Of is the SHA-256 (hex) of the secret's Sealed configuration this
	// state belongs to (see MintOf).
	Of string
	// Sealed is the rotated refresh token, sealed; nil when none.
	Sealed []byte
	// ExpiresAt is when the last token minted expires; zero when none.
	ExpiresAt time.Time
	// Failure says why the last mint was refused, for the owner; "" when
	// it succeeded. It never holds a value.
	Failure   string
	UpdatedAt time.Time
}

// Mints keeps the state of minted secrets. It is read when a token is
// minted and by `secret list`, never cached, so writes record no change.
type Mints interface {
	// SetMintState creates or replaces the state of st.Box's secret
	// st.Name; ErrNotFound if there is no such secret.
	SetMintState(ctx context.Context, st MintState) error
	// MintState returns the state of a box's secret, or ErrNotFound.
	MintState(ctx context.Context, box, name string) (MintState, error)
	// ListMintStates returns the states of a box's secrets, by name.
	ListMintStates(ctx context.Context, box string) ([]MintState, error)
}
