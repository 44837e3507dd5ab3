package store

import (
	"context"
	"time"
)

// ChangePool is the change kind of a write to the operator's pool of
// Anthropic credentials; its Key is the entry's name.
const ChangePool = "pool"

// PoolEntry is one named entry of the operator's pool of Anthropic
// credentials, beside the shared credential "anthropic" (which is the
// pool's entry "default"). Weight is its share of the boxes (at least 1);
// URL is an Anthropic-compatible base URL for it, "" for the broker's
// --anthropic-url; Sealed is its API key or setup token, sealed.
type PoolEntry struct {
	Name      string
	Weight    int
	URL       string
	Sealed    []byte
	UpdatedAt time.Time
}

// Pool keeps the named entries of the operator's credential pool. Every
// write records a ChangePool change keyed by the entry's name.
type Pool interface {
	// SetPoolEntry creates or replaces the entry e.Name.
	SetPoolEntry(ctx context.Context, e PoolEntry) error
	// PoolEntries returns every entry, by name, Sealed included.
	PoolEntries(ctx context.Context) ([]PoolEntry, error)
	// DeletePoolEntry removes the entry named name; ErrNotFound if none.
	DeletePoolEntry(ctx context.Context, name string) error
}
