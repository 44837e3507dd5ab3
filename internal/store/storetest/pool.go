package storetest

import (
	"context"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// testPool holds the pool's entries: set, replaced, listed by name with
// their sealed values, removed, each write logged as a ChangePool change.
func testPool(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.PoolEntries(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("PoolEntries() on an empty store = %v, %v; want none, nil", got, err)
	}
	b := store.PoolEntry{Name: "b", Weight: 2, URL: "https://gw.example/", Sealed: []byte{0, 1, 2, 0xff}, UpdatedAt: at(1)}
	a := store.PoolEntry{Name: "a", Weight: 1, Sealed: []byte("sealed-a"), UpdatedAt: at(2)}
	c := concept[store.PoolEntry]{set: "SetPoolEntry", del: "DeletePoolEntry", key: func(e store.PoolEntry) string { return e.Name },
		write: s.SetPoolEntry, remove: func(ctx context.Context, e store.PoolEntry) error { return s.DeletePoolEntry(ctx, e.Name) }}
	seq := lastChange(t, s)
	c.sets(t, b, a)
	same(t, "SetPoolEntry changes", []store.Change{{Kind: store.ChangePool, Key: "a"}, {Kind: store.ChangePool, Key: "b"}}, keys(changesAfter(t, s, seq)))
	answer(s.PoolEntries(ctx)).is(t, "PoolEntries()", []store.PoolEntry{a, b})
	b2 := store.PoolEntry{Name: "b", Weight: 5, Sealed: []byte("sealed-b2"), UpdatedAt: at(3)}
	c.replaces(t, b2)
	answer(s.PoolEntries(ctx)).is(t, "PoolEntries() after replacing b", []store.PoolEntry{a, b2})
	seq = lastChange(t, s)
	c.removes(t, a)
	same(t, "DeletePoolEntry changes", []store.Change{{Kind: store.ChangePool, Key: "a"}}, keys(changesAfter(t, s, seq)))
	answer(s.PoolEntries(ctx)).is(t, "PoolEntries() after removing a", []store.PoolEntry{b2})
	// The shared credential is not a pool row: it stays where it was.
	wantErr(t, "Credential(anthropic) on a store with only pool entries", second(s.Credential(ctx, "anthropic")), store.ErrNotFound)
}
