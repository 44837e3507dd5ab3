// Package pool is the operator's pool of Anthropic credentials: the
// shared credential ("anthropic", the entry named Default) and the named
// entries beside it, each with a weight and, optionally, an
// Anthropic-compatible base URL of its own.
//
// A box's calls go to one entry while that entry is healthy, chosen by
// weighted rendezvous hashing of the box's name over the healthy entries:
// its prompt cache, which the API keeps per organisation, stays warm, and
// adding or removing an entry moves only the boxes that entry gains or
// loses.
//
// Nothing a box can choose moves what other boxes get. A 429 cools one of
// the entry's rate limits, the one the call counted against (Messages,
// count_tokens or models, with the kind of limit the answer's
// anthropic-ratelimit-* headers name), for the answer's retry-after, the
// limit's reset or an exponential backoff: first for the box that drew it
// alone, and for every box once CoolBoxes boxes drew one. A 529 (or a 5xx
// overloaded_error) cools the entry for the call's model (every route of
// it), in the same way: for the box that drew it, and for every box once
// CoolBoxes boxes' coolings of that model overlap. An answer served ends
// the cooling of the entry's limits for its route, and its overloads of
// its model. A 401 or 403 fails nothing
// by itself: the request, which the box chose, may be what was refused.
// After a 401 the pool asks the upstream itself, with the entry's
// credential, for its model list (at most once per ProbeEvery, one probe
// at a time), and fails the entry for FailedFor only when that plain
// request of the broker's own is refused 401 too. A call refused so,
// before any byte of its answer went to the box, is made again on the
// box's next healthy entry (see capability.Failover).
//
// The entries live in the store and are read through the cache, so every
// replica sees an added or removed entry at once. Health is this
// replica's own: each replica learns it from the answers it gets.
package pool

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// Default is the name of the entry that is the shared credential, the
// one `boxbroker credential set anthropic` sets.
const Default = "default"

// SharedID is the credential ID of the Default entry in the store.
const SharedID = "anthropic"

// AD is the additional data the entry named name is sealed with: the
// Default entry is the shared credential, sealed as it always was.
func AD(name string) string {
	if name == Default {
		return "credential:" + SharedID
	}
	return "credential:" + SharedID + "/" + name
}

// Bounds of an entry's health.
const (
	// CoolBase is the first backoff of an entry that answered 429 or 529
	// with no retry-after; each refusal in a row doubles it, up to
	// CoolMax, which also bounds a retry-after.
	CoolBase = time.Second
	CoolMax  = 5 * time.Minute
	// FailedFor is how long an entry whose credential the upstream
	// refused (a 401 to the pool's own probe) takes no calls on this
	// replica.
	FailedFor = 10 * time.Minute
	// TryFor bounds the time from a call's first try to the start of its
	// last: no entry is tried after it.
	TryFor = 30 * time.Second
	// CoolBoxes is how many boxes must draw a 429 on one of an entry's
	// limits, within its cooling, before it cools for every box; until
	// then it cools only for the boxes that drew one.
	CoolBoxes = 2
	// ProbeEvery bounds how often an entry's credential is probed after
	// a 401; ProbeFor bounds one probe.
	ProbeEvery = time.Minute
	ProbeFor   = 10 * time.Second
)

// Config configures a Pool.
type Config struct {
	// Cache reads the shared credential and the named entries. Required.
	Cache *cache.Cache
	// Keyring opens sealed entries. Required.
	Keyring *secrets.Keyring
	// Upstream is the base URL of an entry that names none (the broker's
	// --anthropic-url).
	Upstream *url.URL
	// Transport carries the probes (default proxy.NewTransport). They
	// go only to the entry's own base URL, and no redirect is followed.
	Transport http.RoundTripper
	// Logger receives a WARN for every entry failed; never a value.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ErrEmpty is returned by Choose when the pool has no entry.
var ErrEmpty = capability.ErrNoCredential

// Pool is the operator's credential pool. Its methods are safe for
// concurrent use.
type Pool struct {
	cfg Config

	mu     sync.Mutex         // guards health and urls
	health map[string]*health // by entry name; this replica's own
	urls   map[string]*url.URL
}

// health is what this replica knows of one entry.
type health struct {
	failed      bool      // its credential was refused (see check)
	failedValue time.Time // the UpdatedAt of the value refused
	failedUntil time.Time
	// limits are its rate limits and its overloads (529,
	// overloaded_error), by name (Limit, overloadKey).
	limits      map[string]*limit
	probing     bool      // a probe of its credential is under way
	probedAt    time.Time // when the last probe began
	probedValue time.Time // the UpdatedAt of the value it probed
	metrics.PoolCounts
}

// New returns a Pool.
func New(cfg Config) *Pool {
	cfg.Transport = proxy.Outbound(cfg.Transport)
	defaults.Logger(&cfg.Logger)
	defaults.Clock(&cfg.Now)
	return &Pool{cfg: cfg, health: map[string]*health{}, urls: map[string]*url.URL{}}
}

// Entry is one entry of the pool as the store keeps it: its value sealed,
// its URL "" for the broker's upstream.
type Entry = store.PoolEntry

// Entries returns the pool's entries, the Default one (when the shared
// credential is set) first and then the named ones by name.
func (p *Pool) Entries(ctx context.Context) ([]Entry, error) {
	named, err := p.cfg.Cache.PoolEntries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(named)+1)
	c, err := p.cfg.Cache.Credential(ctx, SharedID)
	switch {
	case err == nil:
		out = append(out, Entry{Name: Default, Weight: 1, Sealed: c.Sealed, UpdatedAt: c.UpdatedAt})
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	for _, e := range named {
		if e.Name == Default {
			continue // the shared credential is the Default entry
		}
		e.Weight = max(e.Weight, 1)
		out = append(out, e)
	}
	return out, nil
}

// score is entry e's weighted rendezvous score for key: the highest wins.
// It is -w/ln(u) for u the hash of key and name in (0, 1), so that an
// entry wins a share of keys proportional to its weight, and removing an
// entry moves only the keys it had.
func score(key, name string, w int) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(name))
	x := h.Sum64()
	// A final mix, since FNV's low bits are weak for short inputs.
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	u := (float64(x>>11) + 0.5) / (1 << 53) // in (0, 1)
	return -float64(w) / math.Log(u)
}

// Order returns the names of entries es in the order box's calls try them:
// by weighted rendezvous score for box, highest first.
func Order(box string, es []Entry) []string {
	type ranked struct {
		name  string
		score float64
	}
	rs := make([]ranked, len(es))
	for i, e := range es {
		rs[i] = ranked{e.Name, score(box, e.Name, e.Weight)}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].score > rs[j].score })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name
	}
	return out
}

// Choice is one call's way through the pool: the box's entries in
// rendezvous order, the healthy ones first, then the cooling ones.
type Choice struct {
	p       *Pool
	payer   protocol.Payer
	box     string
	route   string  // the limit the call counts against (RouteOf)
	model   string  // the model the call names, once told (Model); "" unknown
	entries []Entry // in the order tried
	healthy int     // how many of entries were healthy when chosen
	i       int     // the entry tried last
	start   time.Time
	// answered is whether any entry answered the call yet.
	answered bool
	// auth is whether the last answer was a 401 or 403, a refusal that
	// is not the upstream's load: the call is made again on the next
	// entry that is not failed, cooling or not.
	auth bool
}

// Choose returns box's way through the pool for one call and the Paid
// for its first try, or ErrEmpty (capability.ErrNoCredential) when the
// pool has no entry. When every entry is cooling or failed, the call
// still goes to the box's first entry, once, so that the box gets the
// upstream's own answer; only a 401 or 403 there is made again, on the
// next entry that is not failed. The call counts against the limit ctx
// names (ForRoute; Messages when it names none).
func (p *Pool) Choose(ctx context.Context, box string, pay protocol.Payer) (capability.Paid, error) {
	es, err := p.Entries(ctx)
	if err != nil {
		return capability.Paid{Payer: pay}, err
	}
	if len(es) == 0 {
		return capability.Paid{Payer: pay}, ErrEmpty
	}
	now := p.cfg.Now()
	c := &Choice{p: p, payer: pay, box: box, route: RouteOf(ctx), start: now, entries: make([]Entry, 0, len(es))}
	h := make([]Entry, 0, len(es))
	var cooling []Entry
	p.mu.Lock()
	for _, e := range es {
		if hl := p.health[e.Name]; hl != nil && hl.failed && e.UpdatedAt.After(hl.failedValue) {
			// Set again since it failed: given another chance.
			hl.failedUntil, hl.failed = time.Time{}, false
		}
		switch {
		case p.usableLocked(e.Name, box, c.route, "", now):
			h = append(h, e)
		case !p.failedLocked(e.Name, now):
			cooling = append(cooling, e)
		}
	}
	p.mu.Unlock()
	c.healthy = len(h)
	if len(h) == 0 {
		first := Order(box, es)[0]
		for _, e := range es {
			if e.Name == first {
				h = append(h, e)
			}
		}
		cooling = slices.DeleteFunc(cooling, func(e Entry) bool { return e.Name == first })
	}
	c.entries = appendOrdered(c.entries, box, h)
	c.entries = appendOrdered(c.entries, box, cooling)
	paid, err := c.paid(0)
	if err != nil {
		return capability.Paid{Payer: pay}, err
	}
	paid.Failover = c
	return paid, nil
}

// appendOrdered appends es to out in box's rendezvous order.
func appendOrdered(out []Entry, box string, es []Entry) []Entry {
	if len(es) < 2 {
		return append(out, es...)
	}
	byName := make(map[string]Entry, len(es))
	for _, e := range es {
		byName[e.Name] = e
	}
	for _, n := range Order(box, es) {
		out = append(out, byName[n])
	}
	return out
}

// failedLocked reports whether the entry name is failed at now.
func (p *Pool) failedLocked(name string, now time.Time) bool {
	h := p.health[name]
	return h != nil && h.failed && now.Before(h.failedUntil)
}

// usableLocked reports whether the entry name takes box's calls on route
// of model ("" when not known) at now: it is not failed, and none of its
// limits for route, nor of its overloads of model, cools for every box
// or for box. A call of a model not known is kept off an entry any of
// whose overloads cools for it.
func (p *Pool) usableLocked(name, box, route, model string, now time.Time) bool {
	h := p.health[name]
	if h == nil {
		return true
	}
	if p.failedLocked(name, now) {
		return false
	}
	for _, l := range h.limits {
		if l.applies(route, model) && l.cools(box, now) {
			return false
		}
	}
	return true
}

// paid opens the i'th entry and counts a request on it.
func (c *Choice) paid(i int) (capability.Paid, error) {
	e := c.entries[i]
	cred, err := c.p.cfg.Keyring.Open(e.Sealed, AD(e.Name))
	var u *url.URL
	if err == nil {
		u, err = c.p.url(e.URL)
	}
	if err != nil {
		return capability.Paid{}, fmt.Errorf("credential pool entry %s: %w", e.Name, err)
	}
	c.i = i
	c.p.mu.Lock()
	c.p.healthLocked(e.Name).Requests++
	c.p.mu.Unlock()
	return capability.Paid{Payer: c.payer, Credential: cred, Entry: e.Name, Upstream: u}, nil
}

// url parses an entry's base URL once; "" is the broker's upstream.
func (p *Pool) url(s string) (*url.URL, error) {
	if s == "" {
		return p.cfg.Upstream, nil
	}
	p.mu.Lock()
	u, ok := p.urls[s]
	p.mu.Unlock()
	if ok {
		return u, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("its URL does not parse")
	}
	p.mu.Lock()
	if len(p.urls) > 1000 {
		clear(p.urls)
	}
	p.urls[s] = u
	p.mu.Unlock()
	return u, nil
}

func (p *Pool) healthLocked(name string) *health {
	h := p.health[name]
	if h == nil {
		h = &health{}
		p.health[name] = h
	}
	return h
}

// Model implements capability.Failover: before any answer, the entries
// are ordered again for the model, healthy first, and the Paid of the
// first is returned when it is not the one chosen. With one entry to
// try there is nothing to move to.
func (c *Choice) Model(name string) (capability.Paid, bool) {
	c.model = name
	if name == "" || c.answered || c.i != 0 || len(c.entries) == 1 {
		return capability.Paid{}, false
	}
	now := c.p.cfg.Now()
	var h, cooling []Entry
	c.p.mu.Lock()
	for _, e := range c.entries {
		if c.p.usableLocked(e.Name, c.box, c.route, name, now) {
			h = append(h, e)
		} else {
			cooling = append(cooling, e)
		}
	}
	c.p.mu.Unlock()
	if len(h) == 0 {
		// Every entry cools for the model too: the first try stays.
		return capability.Paid{}, false
	}
	chosen := c.entries[0].Name
	entries := appendOrdered(make([]Entry, 0, len(c.entries)), c.box, h)
	entries = appendOrdered(entries, c.box, cooling)
	old, oldHealthy := c.entries, c.healthy
	c.entries, c.healthy = entries, len(h)
	if entries[0].Name == chosen {
		return capability.Paid{}, false
	}
	paid, err := c.paid(0)
	if err != nil {
		c.p.cfg.Logger.Warn("credential pool: entry skipped", "entry", entries[0].Name, "err", err)
		c.entries, c.healthy = old, oldHealthy
		return capability.Paid{}, false
	}
	c.p.mu.Lock()
	c.p.healthLocked(chosen).Requests-- // counted by Choose, never made
	c.p.mu.Unlock()
	paid.Failover = c
	return paid, true
}

// Answered implements capability.Failover. After a 401 it probes the
// entry's credential (see probe) before it returns.
func (c *Choice) Answered(status int, hd http.Header, body []byte) bool {
	e := c.entries[c.i]
	c.answered = true
	refused := c.p.answered(e.Name, c.box, c.route, c.model, status, hd, body)
	c.auth = status == http.StatusUnauthorized || status == http.StatusForbidden
	if status == http.StatusUnauthorized {
		c.p.check(e)
	}
	return refused
}

// Next implements capability.Failover, while the call has time left:
// after a 429 or an overload, the next entry that was healthy when the
// call began and still is; after a 401 or 403, which says nothing of
// the upstream's load, the next entry that is not failed, cooling or
// not (a cooling one that is still limited answers the box so).
func (c *Choice) Next() (capability.Paid, bool) {
	now := c.p.cfg.Now()
	if now.Sub(c.start) >= TryFor {
		return capability.Paid{}, false
	}
	prev := c.entries[c.i].Name
	end := c.healthy
	if c.auth {
		end = len(c.entries)
	}
	for i := c.i + 1; i < end; i++ {
		c.p.mu.Lock()
		ok := c.p.usableLocked(c.entries[i].Name, c.box, c.route, c.model, now) ||
			(c.auth && !c.p.failedLocked(c.entries[i].Name, now))
		c.p.mu.Unlock()
		if !ok {
			continue
		}
		paid, err := c.paid(i)
		if err != nil {
			c.p.cfg.Logger.Warn("credential pool: entry skipped", "entry", c.entries[i].Name, "err", err)
			continue
		}
		c.p.mu.Lock()
		c.p.healthLocked(prev).Failovers++
		c.p.mu.Unlock()
		paid.Failover = c
		return paid, true
	}
	return capability.Paid{}, false
}

// Others implements capability.Failover.
func (c *Choice) Others() bool { return c.i+1 < len(c.entries) }
