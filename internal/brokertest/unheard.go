package brokertest

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// Unheard is a store whose change log, while Deaf is set, reads as
// holding nothing new: the broker's memory, polled and fresh, not yet
// told of what another process wrote, as it is for up to its staleness
// bound after each write. Given as Options.Store, it holds a broker in
// that window for as long as a test needs.
type Unheard struct {
	store.Store
	Deaf atomic.Bool
}

// NewUnheard opens a SQLite store in a directory of t's own, as Unheard.
func NewUnheard(t testing.TB) *Unheard {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	return &Unheard{Store: st}
}

// ChangesSince is the store's, or nothing while u is deaf.
func (u *Unheard) ChangesSince(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	if u.Deaf.Load() {
		return nil, nil
	}
	return u.Store.ChangesSince(ctx, after, limit)
}
