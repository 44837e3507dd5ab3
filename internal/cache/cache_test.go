package cache_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

func TestMain(m *testing.M) {
	os.Exit(postgrestest.Main(m))
}

// counting wraps a store, counts box lookups, and runs onChanges inside
// every read of the change log.
type counting struct {
	store.Store
	lookups   atomic.Int64
	onChanges func()
}

func (c *counting) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	c.lookups.Add(1)
	return c.Store.BoxByTokenHash(ctx, hash)
}

func (c *counting) ChangesSince(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	if c.onChanges != nil {
		c.onChanges()
	}
	return c.Store.ChangesSince(ctx, after, limit)
}

// Listen passes a notifying store's notifications on.
func (c *counting) Listen(ctx context.Context, notify func()) error {
	n, ok := c.Store.(store.Notifier)
	if !ok {
		<-ctx.Done()
		return ctx.Err()
	}
	return n.Listen(ctx, notify)
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCache_StaleFromWhenThePollBegan: a slow poll read the log as it was
// when the poll began, so memory may answer for MaxStale from then, not
// from when the poll ended.
func TestCache_StaleFromWhenThePollBegan(t *testing.T) {
	ctx := t.Context()
	clk := clocktest.New(time.Unix(1_000_000, 0))
	st := &counting{Store: openSQLite(t)}
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	const maxStale = 100 * time.Millisecond
	c := cache.New(st, cache.Options{PollEvery: time.Hour, MaxStale: maxStale, Now: clk.Now})

	// A poll that takes 80 ms.
	st.onChanges = func() { clk.Advance(80 * time.Millisecond) }
	if err := c.Poll(ctx); err != nil {
		t.Fatalf("Poll() = %v", err)
	}
	st.onChanges = nil

	lookup := func(when string, wantStore bool) {
		t.Helper()
		before := st.lookups.Load()
		if b, err := c.BoxByTokenHash(ctx, "h1"); err != nil || b.Name != "alpha" {
			t.Fatalf("BoxByTokenHash(h1) %s = %q, %v, want alpha", when, b.Name, err)
		}
		if got := st.lookups.Load() > before; got != wantStore {
			t.Errorf("BoxByTokenHash(h1) %s read the store: %v, want %v", when, got, wantStore)
		}
	}
	lookup("first", true)
	lookup("again, 80 ms after the poll began", false)
	clk.Advance(maxStale - 80*time.Millisecond + time.Millisecond)
	lookup("MaxStale after the poll began", true)
}

func TestCache_Settle(t *testing.T) {
	st := openSQLite(t)
	done, cancel := context.WithCancel(t.Context())
	cancel()

	local := cache.New(st, cache.Options{})
	if err := local.Settle(done); err != nil {
		t.Errorf("Settle() of an unshared cache = %v, want nil at once", err)
	}

	const maxStale = 30 * time.Millisecond
	shared := cache.New(st, cache.Options{Shared: true, MaxStale: maxStale})
	if err := shared.Settle(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Settle() of a shared cache with its context ended = %v, want context.Canceled", err)
	}
	start := time.Now()
	if err := shared.Settle(t.Context()); err != nil {
		t.Errorf("Settle() of a shared cache = %v, want nil", err)
	}
	// Timers never fire early, so this cannot fail on a slow machine.
	if waited := time.Since(start); waited < maxStale {
		t.Errorf("Settle() of a shared cache returned after %v, want at least MaxStale (%v)", waited, maxStale)
	}
}

// TestCache_NotifiedAtOnce: over PostgreSQL, a change another store
// writes reaches the cache by notification, with polling too slow to
// matter.
func TestCache_NotifiedAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dsn := postgrestest.Schema(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("postgres.Open() = %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st, other := &counting{Store: open()}, open()
	if err := other.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c := cache.New(st, cache.Options{PollEvery: time.Hour, MaxStale: time.Hour})
	go c.Run(ctx)

	deadline := time.Now().Add(30 * time.Second)
	// Until Run has read the log, every lookup reads the store; then one
	// keeps the box and the next is answered from memory.
	fromMemory(t, c, st, "h1", deadline)
	if err := other.RotateToken(ctx, "alpha", "h2"); err != nil {
		t.Fatal(err)
	}
	// The notification comes from a PostgreSQL server over a real socket,
	// which a synctest bubble cannot hold (its clock would not wait for
	// the network): so this polls each millisecond, bounded by deadline.
	forgotten(t, c, "h1", deadline, "no notification reached it")
}

// TestCache_SecretFollowsTheChangeLog checks that a cached secret, and a
// cached absence, are dropped when another writer changes the secret or
// removes its box.
func TestCache_SecretFollowsTheChangeLog(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	clock := func() time.Time { return now }
	c := cache.New(st, cache.Options{Now: clock, MaxStale: time.Hour})
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBox(ctx, store.Box{Name: "shop", TokenHash: "h1", CreatedAt: now, PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SecretOfToken(ctx, "shop", "h1", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Secret(unset) error = %v, want ErrNotFound", err)
	}
	set := func(host string) {
		t.Helper()
		if err := st.SetSecret(ctx, store.Secret{Box: "shop", Name: "STRIPE", Host: host, Sealed: []byte{1}, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	set("https://a.example")
	// The absence is cached until the change log is read.
	if _, err := c.SecretOfToken(ctx, "shop", "h1", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Secret before poll error = %v, want the cached ErrNotFound", err)
	}
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.SecretOfToken(ctx, "shop", "h1", "STRIPE")
	if err != nil || s.Host != "https://a.example" {
		t.Fatalf("Secret after set = %+v, %v, want host https://a.example", s, err)
	}
	set("https://b.example")
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := c.SecretOfToken(ctx, "shop", "h1", "STRIPE"); err != nil || s.Host != "https://b.example" {
		t.Fatalf("Secret after change = %+v, %v, want host https://b.example", s, err)
	}
	if err := st.DeleteBox(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SecretOfToken(ctx, "shop", "h1", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Secret after box removed error = %v, want ErrNotFound", err)
	}
}

// TestCache_SecretIsKeptUnderTheToken: a secret read for a request of
// the box that holds its name now is not the answer to a request
// admitted with the token of the box removed before it, while memory
// has not yet read the change: that request reads the store, which
// gives it nothing.
func TestCache_SecretIsKeptUnderTheToken(t *testing.T) {
	ctx, st, c, now := reenrolledUnheard(t, "shared")
	if err := st.SetSecret(ctx, store.Secret{Box: "shop", Name: "STRIPE", Host: "https://new.example", Sealed: []byte{2}, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.SecretOfToken(ctx, "shop", "h2", "STRIPE"); err != nil || s.Host != "https://new.example" {
		t.Fatalf("SecretOfToken(h2) = %+v, %v, want the new box's", s, err)
	}
	for range 2 { // from the store, then from memory
		if s, err := c.SecretOfToken(ctx, "shop", "h1", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("SecretOfToken(h1), the removed box's token = %+v, %v, want ErrNotFound", s, err)
		}
	}
	if s, err := c.SecretOfToken(ctx, "shop", "h2", "STRIPE"); err != nil || s.Host != "https://new.example" {
		t.Fatalf("SecretOfToken(h2) after h1's miss = %+v, %v, want the new box's", s, err)
	}
}

// TestCache_OwnersCredentialIsKeptUnderTheToken: a box's owner's
// credential read for the new box added under a removed box's name is
// not what a request of the removed box (its token admitted from memory
// not yet told) is given, from the store nor from memory.
func TestCache_OwnersCredentialIsKeptUnderTheToken(t *testing.T) {
	ctx, st, c, now := reenrolledUnheard(t, "owner")
	if err := st.SetCredential(ctx, store.Credential{ID: "owner:shop", Sealed: []byte{2}, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if cr, err := c.CredentialOfToken(ctx, "owner:shop", "shop", "h2"); err != nil || string(cr.Sealed) != "\x02" {
		t.Fatalf("CredentialOfToken(h2) = %+v, %v, want the new box's", cr, err)
	}
	for range 2 { // from the store, then from memory
		if cr, err := c.CredentialOfToken(ctx, "owner:shop", "shop", "h1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("CredentialOfToken(h1), the removed box's token = %+v, %v, want ErrNotFound", cr, err)
		}
	}
	if cr, err := c.CredentialOfToken(ctx, "owner:shop", "shop", "h2"); err != nil || string(cr.Sealed) != "\x02" {
		t.Fatalf("CredentialOfToken(h2) after h1's miss = %+v, %v, want the new box's", cr, err)
	}
}

// TestCache_SleepsUnread: a cache nobody reads stops polling; a token
// revoked meanwhile (by another process, through the store) is refused
// by the first read, which goes to the store and wakes the polling.
//
// It runs in a synctest bubble: the clock moves only when every goroutine
// in it waits, so "no poll over 100 ms" speaks of the cache's timers, not
// of how busy the machine is, and the test takes no wall time to wait.
func TestCache_SleepsUnread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var polls atomic.Int64
		st := &counting{Store: openSQLite(t), onChanges: func() { polls.Add(1) }}
		if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		const maxStale = 20 * time.Millisecond
		c := cache.New(st, cache.Options{PollEvery: time.Millisecond, MaxStale: maxStale, IdleAfter: 30 * time.Millisecond})
		done := make(chan struct{})
		go func() { c.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		// Reads while it polls: answered from memory once a poll has begun.
		deadline := time.Now().Add(30 * time.Second)
		fromMemory(t, c, st, "h1", deadline)

		// Unread, it stops polling: no poll over 100 ms, once it has slept.
		asleep := func() bool {
			n := polls.Load()
			time.Sleep(100 * time.Millisecond)
			return polls.Load() == n
		}
		for !asleep() {
			if time.Now().After(deadline) {
				t.Fatal("the cache kept polling with nobody reading it")
			}
		}

		// The token rotated elsewhere: the read that finds the cache asleep
		// and stale goes to the store, and wakes the polling.
		if err := st.RotateToken(ctx, "alpha", "h2"); err != nil {
			t.Fatal(err)
		}
		before := st.lookups.Load()
		if _, err := c.BoxByTokenHash(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("BoxByTokenHash(h1) after the rotation, the cache asleep = %v, want ErrNotFound", err)
		}
		if st.lookups.Load() == before {
			t.Error("the read that found the cache asleep did not go to the store")
		}
		n := polls.Load()
		for polls.Load() == n {
			if time.Now().After(deadline) {
				t.Fatal("a read did not wake the polling")
			}
			time.Sleep(time.Millisecond)
		}
		// Awake again, memory answers.
		if b := fromMemory(t, c, st, "h2", deadline); b.Name != "alpha" {
			t.Fatalf("BoxByTokenHash(h2) = %q, want alpha", b.Name)
		}
	})
}

// fromMemory looks hash up until the cache answers without reading st,
// and returns the box; it fails the test on an error or at deadline. It
// polls each millisecond: on the fake clock inside a synctest bubble, and
// on the real one over PostgreSQL, whose socket no bubble can hold.
func fromMemory(t *testing.T, c *cache.Cache, st *counting, hash string, deadline time.Time) store.Box {
	t.Helper()
	for {
		before := st.lookups.Load()
		b, err := c.BoxByTokenHash(t.Context(), hash)
		if err != nil {
			t.Fatalf("BoxByTokenHash(%s) = %v", hash, err)
		}
		if st.lookups.Load() == before {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache never answered BoxByTokenHash(%s) from memory", hash)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCache_IdleAfterNegativeNeverSleeps: with IdleAfter below zero the
// cache polls whether or not it is read. It runs in a synctest bubble, so
// the 50 ms it stays unread are the cache's clock's, not the machine's.
func TestCache_IdleAfterNegativeNeverSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var polls atomic.Int64
		st := &counting{Store: openSQLite(t), onChanges: func() { polls.Add(1) }}
		c := cache.New(st, cache.Options{PollEvery: time.Millisecond, IdleAfter: -1})
		done := make(chan struct{})
		go func() { c.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		time.Sleep(50 * time.Millisecond) // past any idle bound a test would set
		n := polls.Load()
		deadline := time.Now().Add(30 * time.Second)
		for polls.Load() < n+5 {
			if time.Now().After(deadline) {
				t.Fatal("a cache with IdleAfter below zero stopped polling unread")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// TestCache_SQLiteWriteThroughTheSameStoreWakesIt: over SQLite, a
// change written through the Store the cache reads reaches it by the
// store's in-process signal, with polling too slow to matter.
func TestCache_SQLiteWriteThroughTheSameStoreWakesIt(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &counting{Store: sq}
	if err := sq.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c := cache.New(st, cache.Options{PollEvery: time.Hour, MaxStale: time.Hour})
	go c.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	fromMemory(t, c, st, "h1", deadline)
	if err := sq.RotateToken(ctx, "alpha", "h2"); err != nil {
		t.Fatal(err)
	}
	forgotten(t, c, "h1", deadline, "the store's signal never reached it")
}

// TestCache_SQLiteOtherWriterSeenWithinMaxStale: over SQLite, a change
// written through another Store on the same file (as the CLI, another
// process, writes) is heard of by no signal, yet memory never answers
// with what it changed once MaxStale has passed since the write: the
// poll that goes on while the cache listens keeps the bound.
func TestCache_SQLiteOtherWriterSeenWithinMaxStale(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := filepath.Join(t.TempDir(), "c.db")
	open := func() *sqlite.Store {
		st, err := sqlite.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st, other := &counting{Store: open()}, open()
	if err := other.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c := cache.New(st, cache.Options{})
	go c.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	fromMemory(t, c, st, "h1", deadline)
	time.Sleep(2 * cache.DefaultMaxStale) // the cache listens by now
	written := time.Now()
	if err := other.RotateToken(ctx, "alpha", "h2"); err != nil {
		t.Fatal(err)
	}
	for {
		// The time the read is asked at, taken before it: the cache
		// judges its memory's age during the read, so a read answered
		// from memory was judged at this time or later, and a time taken
		// after it would add how long the read took to return.
		before := st.lookups.Load()
		asked := time.Now()
		_, err := c.BoxByTokenHash(ctx, "h1")
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("BoxByTokenHash(h1) = %v", err)
		}
		if st.lookups.Load() == before && asked.Sub(written) > cache.DefaultMaxStale {
			t.Fatalf("memory answered with the old token %v after another writer rotated it, want at most %v", asked.Sub(written), cache.DefaultMaxStale)
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache kept the old token")
		}
		time.Sleep(time.Millisecond)
	}
}

// forgotten polls c each millisecond until the token hash h is no box's,
// failing the test at deadline with why: the cache kept the old token
// with polls an hour apart.
func forgotten(t *testing.T, c *cache.Cache, h string, deadline time.Time, why string) {
	t.Helper()
	for {
		_, err := c.BoxByTokenHash(context.Background(), h)
		if errors.Is(err, store.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatalf("BoxByTokenHash(%s) = %v", h, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache kept the old token with polls an hour apart: " + why)
		}
		time.Sleep(time.Millisecond)
	}
}

// reenrolledUnheard opens a store and a cache over it, fresh for an hour,
// in which the box shop (paid as payerKind) held the token hashing to h1
// when the cache last read the change log; then, by another process as
// it were, shop is removed and added anew with the token h2, which the
// cache has not read.
func reenrolledUnheard(t *testing.T, payerKind string) (context.Context, *sqlite.Store, *cache.Cache, time.Time) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	c := cache.New(st, cache.Options{Now: func() time.Time { return now }, MaxStale: time.Hour})
	if err := st.CreateBox(ctx, store.Box{Name: "shop", TokenHash: "h1", CreatedAt: now, PayerKind: payerKind}); err != nil {
		t.Fatal(err)
	}
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteBox(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBox(ctx, store.Box{Name: "shop", TokenHash: "h2", CreatedAt: now, PayerKind: payerKind}); err != nil {
		t.Fatal(err)
	}
	return ctx, st, c, now
}
