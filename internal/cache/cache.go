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
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/intentius/boxbroker/internal/defaults"
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
	// decls are the boxes' reports (nil: never reported), kept as
	// secrets are, by box and the hash of the token of the request that
	// read them.
	decls    map[declKey]*protocol.Declaration
	creds    map[string]store.Credential
	credMiss map[string]struct{}
	// budgeted says whether a box has any budget, kept by the box as it
	// was enrolled (its name and created_at): a box added under the name
	// of one removed, which memory has not yet heard of, is not taken to
	// have the removed box's budgets, or none as it had none.
	budgeted map[enrolment]bool
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
	c.decls = map[declKey]*protocol.Declaration{}
	c.creds = map[string]store.Credential{}
	c.credMiss = map[string]struct{}{}
	c.budgeted = map[enrolment]bool{}
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
		dropDecls(c, key)
		dropBudgeted(c, key)
		// A removed box takes its secrets with it.
		dropSecrets(c, func(k secretKey) bool { return k.box == key })
		dropBoxCreds(c, func(k credKey) bool { return k.box == key })
	case store.ChangeDeclaration:
		dropDecls(c, key)
	case store.ChangeBudget:
		dropBudgeted(c, key)
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
