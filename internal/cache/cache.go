// Package cache keeps what the broker reads on every request — token hash
// to box, each box's last declaration, credentials, egress secrets — in
// memory, and drops
// entries when the store's change log says another process or replica
// wrote them.
//
// Staleness is bounded: the change log is polled every PollEvery (20 ms by
// default), and when no poll has succeeded for MaxStale (100 ms by
// default) the cache stops answering from memory and every read goes to
// the store, so a replica that cannot see the log fails closed rather than
// serving old state. A store that notifies (store.Notifier: PostgreSQL's
// LISTEN, or SQLite's signal from a write through the same Store) wakes a
// poll at once; while it listens, the poll that remains for what it
// cannot hear of runs every MaxStale/2 instead (never more often than
// PollEvery), so that writes it does not hear of are still seen, and
// memory still answers, within MaxStale.
//
// A cache nobody reads stops polling: after IdleAfter (5 s by default)
// without a read, Run waits for the next one. Memory then goes stale as
// it would if the polls failed, so the reads that find it asleep go to
// the store, and the first of them wakes it.
package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/hold"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// Defaults for Options.
const (
	DefaultPollEvery = 20 * time.Millisecond
	DefaultMaxStale  = 100 * time.Millisecond
	DefaultIdleAfter = 5 * time.Second
	// maxMissing bounds each negative cache (unknown token hashes,
	// credentials, secrets).
	maxMissing = 10000
)

// Options tune a Cache. Zero values take the defaults.
type Options struct {
	// PollEvery is how often the change log is read.
	PollEvery time.Duration
	// MaxStale bounds how old what memory answers may be: memory answers
	// only while the last successful poll began at most MaxStale ago.
	MaxStale time.Duration
	// IdleAfter is how long Run polls without a read before it stops
	// polling until the next read; below zero, it never stops.
	IdleAfter time.Duration
	// Shared says that other processes (replicas) serve from the same
	// store through caches of their own, with the same MaxStale; Settle
	// then waits for them.
	Shared bool
	// Changes, when set, is where the change log is read (the store
	// when nil): the same store with a longer bound than a request's
	// reads, so that a slow poll is not taken for an outage. A poll's
	// length never lengthens what memory answers: that is counted from
	// the moment the poll began.
	Changes store.Changes
	Logger  *slog.Logger
	Now     func() time.Time
}

// Cache is a read-through cache over a store.Store. Its methods are safe
// for concurrent use.
type Cache struct {
	st  store.Store
	opt Options
	log *slog.Logger

	// read is set by reads and cleared by Run's every tick, which so
	// learns whether the cache is in use; asleep is set while Run waits
	// for a read, which then sends on wakeUp.
	read, asleep atomic.Bool
	wakeUp       chan struct{}
	// listening is set while a store.Notifier listens for changes, and
	// the poll runs at listeningPoll rather than PollEvery.
	listening atomic.Bool

	// flights shares one store read among the reads that miss on the
	// same key at once (see shared), so a burst of requests after a quiet
	// spell, or for boxes not yet read, asks the store once a key.
	flights singleflight.Group

	mu       sync.RWMutex // guards everything below
	gen      uint64       // bumped on every drop, so a load that raced a drop is not kept
	seq      int64        // last change applied
	polledAt time.Time    // when the last successful poll began
	boxes    map[string]store.Box
	byName   map[string][]string // box name → the token hashes it is kept under (its token's, and an old one's in a rotation's grace), for dropping
	missing  map[string]struct{}
	decls    map[string]*protocol.Declaration // nil value: never reported
	creds    map[string]store.Credential
	credMiss map[string]struct{}
	budgeted map[string]bool // box name → whether it has any budget
	// secrets are kept by box, name and the hash of the token of the
	// request that read them, which re-enrolment under the box's name
	// and rotation change: a request admitted with a token its box no
	// longer holds (from memory not yet told of the change) is never
	// answered with what another token's request read.
	secrets map[secretKey]store.Secret
	secMiss map[secretKey]struct{}
	// boxCreds are a box's own credentials (an owner's), kept as secrets
	// are: by ID, box and the hash of the token of the request that read
	// them.
	boxCreds map[credKey]store.Credential
	boxMiss  map[credKey]struct{}
	pool     []store.PoolEntry // the pool's named entries; nil: not loaded
}

// New returns a Cache over st. Call Run to keep it fresh; until Run has
// polled once, every read goes to the store.
func New(st store.Store, opt Options) *Cache {
	defaults.Positive(&opt.PollEvery, DefaultPollEvery)
	defaults.Positive(&opt.MaxStale, DefaultMaxStale)
	if opt.IdleAfter == 0 {
		opt.IdleAfter = DefaultIdleAfter
	}
	defaults.Logger(&opt.Logger)
	defaults.Clock(&opt.Now)
	if opt.Changes == nil {
		opt.Changes = st
	}
	c := &Cache{st: st, opt: opt, log: opt.Logger, wakeUp: make(chan struct{}, 1)}
	c.resetLocked()
	return c
}

func (c *Cache) resetLocked() {
	c.gen++
	c.boxes = map[string]store.Box{}
	c.byName = map[string][]string{}
	c.missing = map[string]struct{}{}
	c.decls = map[string]*protocol.Declaration{}
	c.creds = map[string]store.Credential{}
	c.credMiss = map[string]struct{}{}
	c.budgeted = map[string]bool{}
	c.secrets = map[secretKey]store.Secret{}
	c.secMiss = map[secretKey]struct{}{}
	c.boxCreds = map[credKey]store.Credential{}
	c.boxMiss = map[credKey]struct{}{}
	c.pool = nil
}

// Run polls the change log until ctx ends.
func (c *Cache) Run(ctx context.Context) {
	began := c.opt.Now()
	seq, err := c.opt.Changes.LastChange(ctx)
	for err != nil {
		c.log.Warn("cache: read change log", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.opt.PollEvery * 10):
		}
		began = c.opt.Now()
		seq, err = c.opt.Changes.LastChange(ctx)
	}
	c.mu.Lock()
	c.resetLocked()
	c.seq = seq
	c.polledAt = began
	c.mu.Unlock()

	// A store that notifies wakes the loop as soon as a change is logged.
	wake := make(chan struct{}, 1)
	if n, ok := notifier(c.st); ok {
		go c.listen(ctx, n, wake)
	}

	every := c.opt.PollEvery
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	lastRead := c.opt.Now() // when a tick last saw that a read had come
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		if e := c.pollEvery(); e != every {
			every = e
			t.Reset(every)
		}
		if c.opt.IdleAfter > 0 {
			if now := c.opt.Now(); c.read.Swap(false) {
				lastRead = now
			} else if now.Sub(lastRead) >= c.opt.IdleAfter {
				t.Stop()
				if !c.sleep(ctx) {
					return
				}
				lastRead = c.opt.Now()
				t.Reset(every)
			}
		}
		if err := c.Poll(ctx); err != nil {
			if !failing && ctx.Err() == nil {
				c.log.Warn("cache: poll change log", "err", err)
			}
			failing = true
		} else if failing {
			c.log.Info("cache: change log readable again")
			failing = false
		}
	}
}

// pollEvery is how often the change log is polled now: PollEvery, or
// while a notifier listens, every MaxStale/2 (never more often than
// PollEvery): often enough that what the notifier does not hear of is
// seen, and memory answers, within MaxStale.
func (c *Cache) pollEvery() time.Duration {
	if c.listening.Load() {
		return max(c.opt.PollEvery, c.opt.MaxStale/2)
	}
	return c.opt.PollEvery
}

// notifier is st, or the store st wraps (one with an Unwrap method, as
// a store bounded by deadlines), when it is a store.Notifier.
func notifier(st store.Store) (store.Notifier, bool) {
	for st != nil {
		if n, ok := st.(store.Notifier); ok {
			return n, true
		}
		u, ok := st.(interface{ Unwrap() store.Store })
		if !ok {
			return nil, false
		}
		st = u.Unwrap()
	}
	return nil, false
}

// sleep waits for a read (or for ctx to end, reporting false). A read
// sets read before it looks at asleep, and sleep sets asleep before it
// looks at read, so a read racing the decision to sleep is never missed.
func (c *Cache) sleep(ctx context.Context) bool {
	select {
	case <-c.wakeUp: // from a read that came while Run was last awake
	default:
	}
	c.asleep.Store(true)
	defer c.asleep.Store(false)
	if c.read.Load() {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.wakeUp:
		return true
	}
}

// listen sends on wake whenever n says a change was logged, listening
// again a second after a failure, until ctx ends. n calls notify on this
// goroutine, so failing needs no lock.
func (c *Cache) listen(ctx context.Context, n store.Notifier, wake chan<- struct{}) {
	wakeUp := func() {
		select {
		case wake <- struct{}{}:
		default: // a wake-up is already pending; one poll reads everything
		}
	}
	failing := false
	notify := func() {
		if failing {
			c.log.Info("cache: listening for changes again")
			failing = false
		}
		c.listening.Store(true)
		wakeUp()
	}
	for {
		err := n.Listen(ctx, notify)
		c.listening.Store(false)
		wakeUp() // back to polling at PollEvery at once
		if ctx.Err() != nil {
			return
		}
		if !failing {
			c.log.Warn("cache: listen for changes; polling alone until it listens again", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Poll applies every change written since the last poll. Memory answers
// for MaxStale from the moment a successful poll began, since the log it
// read holds every write committed before that moment.
func (c *Cache) Poll(ctx context.Context) error {
	began := c.opt.Now()
	c.mu.RLock()
	after, polledAt := c.seq, c.polledAt
	c.mu.RUnlock()
	var all []store.Change
	for {
		ch, err := c.opt.Changes.ChangesSince(ctx, after, 1000)
		if err != nil {
			return err
		}
		all = append(all, ch...)
		if len(ch) < 1000 {
			break
		}
		after = ch[len(ch)-1].Seq
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A long gap may have outlived the pruned log: drop everything.
	if !polledAt.IsZero() && c.opt.Now().Sub(polledAt) > 5*time.Minute {
		c.resetLocked()
	}
	for _, ch := range all {
		if ch.Seq > c.seq {
			c.dropLocked(ch.Kind, ch.Key)
			c.seq = ch.Seq
		}
	}
	if began.After(c.polledAt) {
		c.polledAt = began
	}
	return nil
}

// Settle returns once every cache over the store, this one and any other
// replica's, answers with what was written before Settle was called: at
// once unless Options.Shared, and after MaxStale if so, since by then each
// replica has either polled the log past the write or stopped answering
// from memory. It returns ctx's error if ctx ends first.
func (c *Cache) Settle(ctx context.Context) error {
	if !c.opt.Shared {
		return nil
	}
	return WaitStale(ctx, c.opt.MaxStale)
}

// WaitStale waits out a staleness bound of maxStale, and a millisecond
// more for clocks that tick coarsely: once it returns nil, every cache
// held to that bound has read a write made before the call, or stopped
// answering from memory. It returns ctx's error if ctx ends first.
func WaitStale(ctx context.Context, maxStale time.Duration) error {
	t := time.NewTimer(maxStale + time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Drop forgets what a local write touched, at once.
func (c *Cache) Drop(kind, key string) {
	c.mu.Lock()
	c.dropLocked(kind, key)
	c.mu.Unlock()
}

func (c *Cache) dropLocked(kind, key string) {
	c.gen++
	switch kind {
	case store.ChangeBox:
		for _, h := range c.byName[key] {
			delete(c.boxes, h)
		}
		delete(c.byName, key)
		clear(c.missing)
		delete(c.decls, key)
		delete(c.budgeted, key)
		// A removed box takes its secrets with it.
		dropSecrets(c, func(k secretKey) bool { return k.box == key })
		dropBoxCreds(c, func(k credKey) bool { return k.box == key })
	case store.ChangeDeclaration:
		delete(c.decls, key)
	case store.ChangeBudget:
		delete(c.budgeted, key)
	case store.ChangeCredential:
		delete(c.creds, key)
		delete(c.credMiss, key)
		dropBoxCreds(c, func(k credKey) bool { return k.id == key })
	case store.ChangeSecret:
		box, name, _ := strings.Cut(key, "/")
		dropSecrets(c, func(k secretKey) bool { return k.box == box && k.name == name })
	case store.ChangePool:
		c.pool = nil
	default:
		// Other kinds are not cached here.
	}
}

// fresh reports whether memory may answer, and the generation to check
// before keeping a load. It is how every read begins, and records the
// read for Run (waking it if it sleeps): after the first read of a tick
// this costs two atomic loads.
func (c *Cache) fresh() (bool, uint64) {
	if !c.read.Load() {
		c.read.Store(true)
	}
	if c.asleep.Load() {
		select {
		case c.wakeUp <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return !c.polledAt.IsZero() && c.opt.Now().Sub(c.polledAt) <= c.opt.MaxStale, c.gen
}

// BoxByTokenHash returns the box whose token hashes to hash, or
// store.ErrNotFound.
func (c *Cache) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	return cached(ctx, c, "box", hash, &c.boxes, &c.missing, func(b store.Box) {
		if _, kept := c.boxes[hash]; !kept {
			c.byName[b.Name] = append(c.byName[b.Name], hash)
		}
	}, func(ctx context.Context) (store.Box, error) { return c.st.BoxByTokenHash(ctx, hash) })
}

// Declaration returns a box's last kept report, or nil when it never
// reported. The result is shared and must not be modified.
func (c *Cache) Declaration(ctx context.Context, box string) (*protocol.Declaration, error) {
	return cached(ctx, c, "declaration", box, &c.decls, nil, nil, func(ctx context.Context) (*protocol.Declaration, error) {
		doc, at, err := c.st.Declaration(ctx, box)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		d := &protocol.Declaration{}
		if err := json.Unmarshal(doc, d); err != nil {
			return nil, fmt.Errorf("declaration of %s: %w", box, err)
		}
		d.At = at
		return d, nil
	})
}

// Budgeted reports whether box has any budget, its own or a principal's
// on it: a model call of a box with none reserves nothing, so it need not
// ask the store.
func (c *Cache) Budgeted(ctx context.Context, box string) (bool, error) {
	return cached(ctx, c, "budgeted", box, &c.budgeted, nil, nil, func(ctx context.Context) (bool, error) {
		bs, err := c.st.ListBudgets(ctx, box)
		if err != nil || len(bs) > 0 {
			return len(bs) > 0, err
		}
		ws, err := c.st.ListWindowBudgets(ctx, box)
		return len(ws) > 0, err
	})
}

// Credential returns the sealed credential with that ID, or store.ErrNotFound.
func (c *Cache) Credential(ctx context.Context, id string) (store.Credential, error) {
	return cached(ctx, c, "credential", id, &c.creds, &c.credMiss, nil, func(ctx context.Context) (store.Credential, error) { return c.st.Credential(ctx, id) })
}

// SecretOfToken returns a box's sealed egress secret for a request of
// the box admitted with the token that hashes to tokenHash, or
// store.ErrNotFound: the store's SecretOfToken, which reads it only
// while the box holds that token, kept under the token's hash.
func (c *Cache) SecretOfToken(ctx context.Context, box, tokenHash, name string) (store.Secret, error) {
	return cached(ctx, c, "secret", secretKey{box, name, tokenHash}, &c.secrets, &c.secMiss, nil, func(ctx context.Context) (store.Secret, error) {
		return c.st.SecretOfToken(ctx, box, tokenHash, name)
	})
}

// CredentialOfToken returns the sealed credential with that ID, a box's
// own (an owner's), for a request of the box admitted with the token that
// hashes to tokenHash, or store.ErrNotFound: the store's
// CredentialOfToken, which reads it only while the box holds that token,
// kept under the token's hash.
func (c *Cache) CredentialOfToken(ctx context.Context, id, box, tokenHash string) (store.Credential, error) {
	return cached(ctx, c, "box credential", credKey{id, box, tokenHash}, &c.boxCreds, &c.boxMiss, nil, func(ctx context.Context) (store.Credential, error) {
		return c.st.CredentialOfToken(ctx, id, box, tokenHash)
	})
}

// credKey is what a box's own credential is kept under: its ID, its box,
// and the hash of the token of the request that read it.
type credKey struct{ id, box, tokenHash string }

// String names the key in the flight of its read.
func (k credKey) String() string { return k.id + "\x00" + k.box + "\x00" + k.tokenHash }

// dropBoxCreds forgets the boxes' own credentials, and the missing ones,
// whose keys drop says to, with c.mu held.
func dropBoxCreds(c *Cache, drop func(credKey) bool) {
	maps.DeleteFunc(c.boxCreds, func(k credKey, _ store.Credential) bool { return drop(k) })
	maps.DeleteFunc(c.boxMiss, func(k credKey, _ struct{}) bool { return drop(k) })
}

// secretKey is what a secret is kept under: its box, its name, and the
// hash of the token of the request that read it.
type secretKey struct{ box, name, tokenHash string }

// String names the key in the flight of its read.
func (k secretKey) String() string { return k.box + "/" + k.name + "\x00" + k.tokenHash }

// dropSecrets forgets the secrets, and the missing ones, whose keys drop
// says to, with c.mu held.
func dropSecrets(c *Cache, drop func(secretKey) bool) {
	maps.DeleteFunc(c.secrets, func(k secretKey, _ store.Secret) bool { return drop(k) })
	maps.DeleteFunc(c.secMiss, func(k secretKey, _ struct{}) bool { return drop(k) })
}

// cached is how every read of the cache goes: from memory while it is
// fresh (*hitsAt, or *missesAt as store.ErrNotFound), else from load, once for
// all callers through shared. What load found is kept in *hitsAt (keep, if
// not nil, is called first, with c.mu held); store.ErrNotFound is kept in
// *missesAt, up to maxMissing of them (a new one taking an old one's place
// once it is full), when missesAt is not nil, and returned
// otherwise as any other error. Nothing is kept when a drop came while
// load ran. hitsAt and missesAt point at the cache's fields, read only
// under c.mu: a reset replaces the maps, and a read must not answer from
// ones it threw away.
func cached[K comparable, V any](ctx context.Context, c *Cache, kind string, key K, hitsAt *map[K]V, missesAt *map[K]struct{}, keep func(V), load func(context.Context) (V, error)) (V, error) {
	var zero V
	c.mu.RLock()
	ok, gen := c.fresh()
	if ok {
		if v, hit := (*hitsAt)[key]; hit {
			c.mu.RUnlock()
			return v, nil
		}
		if missesAt != nil {
			if _, miss := (*missesAt)[key]; miss {
				c.mu.RUnlock()
				return zero, store.ErrNotFound
			}
		}
	}
	c.mu.RUnlock()
	v, err := shared(ctx, c, kind, gen, keyName(key), load)
	if err != nil && (missesAt == nil || !errors.Is(err, store.ErrNotFound)) {
		return zero, err
	}
	c.mu.Lock()
	if ok && c.gen == gen {
		if err == nil {
			if keep != nil {
				keep(v)
			}
			(*hitsAt)[key] = v
		} else {
			if len(*missesAt) >= maxMissing {
				// Full: one kept miss makes way, whichever the map gives
				// first, so that misses a client sends at random cannot
				// keep the misses that recur (a box left with a removed
				// token, asking again and again) from being kept.
				for k := range *missesAt {
					delete(*missesAt, k)
					break
				}
			}
			(*missesAt)[key] = struct{}{}
		}
	}
	c.mu.Unlock()
	return v, err
}

// keyName is key as a string: itself, or what its String method says.
func keyName[K comparable](key K) string {
	switch k := any(key).(type) {
	case string:
		return k
	case fmt.Stringer:
		return k.String()
	}
	return fmt.Sprint(key)
}

// shared runs read, the store read behind a miss on key (of kind, at the
// cache's generation gen), once for every caller that misses on the same
// key at the same generation while it runs; each caller gets its result,
// or leaves with its own context's error when that ends first. A read
// that began before a drop is not shared with a caller that came after it
// (the generation is in the key), so what a caller keeps is never older
// than the drop it saw. The read runs on a context of its own, without the
// first caller's cancellation, so one caller leaving does not fail the
// others; the store's own deadline bounds it.
func shared[T any](ctx context.Context, c *Cache, kind string, gen uint64, key string, read func(context.Context) (T, error)) (T, error) {
	return hold.Shared(ctx, &c.flights, flightKey(kind, gen, key), func() (T, error) { return read(context.WithoutCancel(ctx)) })
}

// flightKey names the store read of key, of kind, at generation gen.
func flightKey(kind string, gen uint64, key string) string {
	return kind + "\x00" + strconv.FormatUint(gen, 10) + "\x00" + key
}
