package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// concept is one stored concept (boxes, credentials, secrets, admin
// tokens, ...) as the suite writes, reads back and removes its values,
// each step through the store's method for it. A failure's message names
// the method and the value's key ("SetCredential(\"anthropic\") again"),
// so that it says which concept and which step failed.
type concept[T any] struct {
	set, del string         // the write's and the removal's method names
	key      func(T) string // a value's key, as the methods' arguments
	write    func(context.Context, T) error
	remove   func(context.Context, T) error
	reads    []reader[T] // the methods that read a value back by a key of it
}

// reader is a method that reads a value back; key is the key it reads
// by, the concept's when nil.
type reader[T any] struct {
	name string
	key  func(T) string
	read func(context.Context, T) (T, error)
}

// sets writes each of vs, stopping the test at an error.
func (c concept[T]) sets(t *testing.T, vs ...T) {
	t.Helper()
	for _, v := range vs {
		must(t, fmt.Sprintf("%s(%s)", c.set, c.key(v)), c.write(t.Context(), v))
	}
}

// gets reads each of want back through every reader, and fails unless
// it is want as a store keeps it (same); note ends the failure's call.
func (c concept[T]) gets(t *testing.T, note string, want ...T) {
	t.Helper()
	for _, w := range want {
		for _, r := range c.reads {
			answer(r.read(t.Context(), w)).is(t, c.call(r, w)+note, w)
		}
	}
}

// call is the reader r's call that reads v.
func (c concept[T]) call(r reader[T], v T) string {
	if r.key == nil {
		return fmt.Sprintf("%s(%s)", r.name, c.key(v))
	}
	return fmt.Sprintf("%s(%s)", r.name, r.key(v))
}

// replaces writes v over the value of its key, and reads v back.
func (c concept[T]) replaces(t *testing.T, v T) {
	t.Helper()
	must(t, fmt.Sprintf("%s(%s) again", c.set, c.key(v)), c.write(t.Context(), v))
	c.gets(t, " after replacing", v)
}

// removes removes v: no reader finds it after, and removing it again is
// refused with store.ErrNotFound.
func (c concept[T]) removes(t *testing.T, v T) {
	t.Helper()
	must(t, fmt.Sprintf("%s(%s)", c.del, c.key(v)), c.remove(t.Context(), v))
	for _, r := range c.reads {
		wantErr(t, c.call(r, v)+" after delete", second(r.read(t.Context(), v)), store.ErrNotFound)
	}
	wantErr(t, fmt.Sprintf("%s(%s) again", c.del, c.key(v)), c.remove(t.Context(), v), store.ErrNotFound)
}

// refuses writes each value of taken, in a subtest named for the key it
// shares with a stored value ("same ID"): the store refuses it with
// store.ErrExists and records no change.
func (c concept[T]) refuses(t *testing.T, s store.Store, taken map[string]T) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(taken)) {
		v := taken[name]
		t.Run(name, func(t *testing.T) {
			refused(t, s, fmt.Sprintf("%s(%s)", c.set, c.key(v)), func(ctx context.Context) error { return c.write(ctx, v) }, store.ErrExists)
		})
	}
}

// refused checks that write, the call named call, fails with want
// (errors.Is) and records no change.
func refused(t *testing.T, s store.Store, call string, write func(context.Context) error, want error) {
	t.Helper()
	seq := lastChange(t, s)
	wantErr(t, call, write(t.Context()), want)
	noChange(t, s, call, seq)
}

// noSealed fails for each value of the list call named call that holds
// its sealed value (sealed is a value's name and sealed value): a list
// names values, it never reads them out.
func noSealed[T any](t *testing.T, call string, list []T, sealed func(T) (string, []byte)) {
	t.Helper()
	for _, v := range list {
		if name, b := sealed(v); b != nil {
			t.Errorf("%s holds %q's sealed value, want Sealed nil", call, name)
		}
	}
}
