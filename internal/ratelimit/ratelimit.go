// Package ratelimit holds boxes' model calls to token-rate limits: input
// tokens, output tokens and requests a minute, per box and per principal
// on a box (store.RateLimit).
//
// A Limiter counts in memory, in a ring of sixty one-second slots a key
// (a box, or a principal on a box), so that a minute's use is the sum of
// the slots of the last sixty seconds. A request is admitted while, for
// every limit that applies, the requests of the last minute plus this
// one are within RPM and the input and output tokens of the last minute
// are below their limits. Tokens are known only once the answer is read,
// so a call is charged its tokens as it settles (Charge), and a call that
// takes a key past a token limit is let through whole: the next calls are
// refused until enough of the minute has passed. The overshoot of a token
// limit is therefore at most the calls in flight when it was reached.
//
// Replicas sharing a store (PostgreSQL) hold the limits together without
// a store write per request: every Every (a second), each replica writes
// its own minute's counts of the keys it has used, one row a key, and
// reads the others' (store.RateLimits.ExchangeRates), fresh by the
// store's clock, not the replicas' own; a request is judged
// against its replica's counts plus the others' last reported. A replica
// sees another's use up to one exchange late, so limits can be passed by
// what the other replicas admit in that time. The limits themselves are
// read from the store at every round too.
//
// A limit is the box's configuration, and goes with the box when it is
// removed (read again within a round). Its counts are of the box as it
// was enrolled (its CreatedAt): a box added under the name of one
// removed starts with an empty minute, even when it is given the same
// limit within a round, and the calls of the removed box still in
// flight or admitted from memory (and their tokens, as they settle)
// neither count against it nor are judged by its counts. The counts
// replicas exchange name the enrolment too (counter.String), so a replica
// of a version that names none shares no counts with this one.
package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/store"
)

// Every is how often a Limiter reads the limits and exchanges its
// counts: the period of Run's rounds.
const Every = time.Second

// Config configures a Limiter. Zero fields take the defaults.
type Config struct {
	// Store keeps the limits and the counts replicas exchange. Required.
	Store store.RateLimits
	// Exchange, when true, exchanges counts with the other replicas
	// through Store at every round (replicas sharing PostgreSQL); false
	// counts this process alone (SQLite).
	Exchange bool
	// Replica names this process among the replicas (random when "").
	Replica string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger receives rounds that fail (slog.Default when nil).
	Logger *slog.Logger
}

// key is a limit's key: a box's own (principal "") or a principal's on it.
type key struct{ box, principal string }

// counter is what a key's counts are of: the key of the box enrolled at
// enrolled (its CreatedAt in Unix microseconds).
type counter struct {
	key
	enrolled int64
}

// String is c as the store keeps it: box, a space, principal, a space,
// enrolled (neither box nor principal holds white space).
func (c counter) String() string {
	return c.box + " " + c.principal + " " + strconv.FormatInt(c.enrolled, 10)
}

// slot is one second's counts.
type slot struct {
	sec                int64
	req, input, output int64
}

// ring is a key's last minute, a slot a second, counted for the box
// enrolled at enrolled.
type ring struct {
	enrolled int64
	slots    [60]slot
}

// plus adds o's counts to s's.
func (s *slot) plus(o slot) {
	s.req += o.req
	s.input += o.input
	s.output += o.output
}

// add adds c's counts to the slot of second sec.
func (r *ring) add(sec int64, c slot) {
	s := &r.slots[sec%60]
	if s.sec != sec {
		*s = slot{sec: sec}
	}
	s.plus(c)
}

// sum is the counts of the minute ending with second sec, and the oldest
// second that holds any (0 for none).
func (r *ring) sum(sec int64) (total slot, oldest int64) {
	for _, s := range r.slots {
		if s.sec > sec-60 && s.sec <= sec && (s.req|s.input|s.output) != 0 {
			total.plus(s)
			if oldest == 0 || s.sec < oldest {
				oldest = s.sec
			}
		}
	}
	return total, oldest
}

// Limiter holds calls to rate limits. It is safe for concurrent use.
type Limiter struct {
	// limits are the limits as last read, replaced whole at each round
	// (under mu) and read without it: a call of a key with no limit
	// takes no lock. cfg lies between it and mu, so that reading it does
	// not wait on the cache line mu's holders write.
	limits atomic.Pointer[map[key]store.RateLimit]

	cfg Config
	log *slog.Logger

	mu sync.Mutex // guards what follows
	// local is this process's counts of each key with a limit, for the
	// box of its name enrolled last that this process counted.
	local map[key]*ring
	// remote is the other replicas' counts of each key and enrolment,
	// as last read.
	remote map[counter]slot
}

// New returns a Limiter, or an error without a store.
func New(cfg Config) (*Limiter, error) {
	if cfg.Store == nil {
		return nil, errors.New("ratelimit: no store")
	}
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	if cfg.Replica == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Replica = hex.EncodeToString(b[:])
	}
	l := &Limiter{cfg: cfg, log: cfg.Logger, local: map[key]*ring{}, remote: map[counter]slot{}}
	l.limits.Store(&map[key]store.RateLimit{})
	return l, nil
}

// Refusal is a request refused by a limit: Limit is the limit passed, Of
// what it counts ("requests", "input tokens" or "output tokens"), Used
// the minute's count, and RetryAfter when the request may be tried again.
type Refusal struct {
	Limit      store.RateLimit
	Of         string
	Used, Max  int64
	RetryAfter time.Duration
}

// Admit counts a request of the box named box, enrolled at created (its
// CreatedAt), paid by principal ("" for none) and returns nil, or returns
// the refusal of the first limit it would pass (the box's before the
// principal's) and counts nothing. A request of a box enrolled before
// the one whose requests the limit counts here (one removed since, and
// another added under its name) is neither judged nor counted.
func (l *Limiter) Admit(box string, created time.Time, principal string) *Refusal {
	keys, n := keysOf(box, principal)
	lims, has := l.limitsOf(keys, n)
	if !has[0] && !has[1] {
		return nil
	}
	now := l.cfg.Now()
	sec := now.Unix()
	enrolled := created.UnixMicro()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range keys[:n] {
		lim := lims[i]
		if !has[i] {
			continue
		}
		var used slot
		var oldest int64
		if r := l.local[k]; r != nil {
			if r.enrolled > enrolled {
				continue // a removed box's
			}
			if r.enrolled == enrolled {
				used, oldest = r.sum(sec)
			}
		}
		used.plus(l.remote[counter{k, enrolled}])
		var f *Refusal
		switch {
		case lim.RPM > 0 && used.req+1 > lim.RPM:
			f = &Refusal{Limit: lim, Of: "requests", Used: used.req, Max: lim.RPM}
		case lim.InputTPM > 0 && used.input >= lim.InputTPM:
			f = &Refusal{Limit: lim, Of: "input tokens", Used: used.input, Max: lim.InputTPM}
		case lim.OutputTPM > 0 && used.output >= lim.OutputTPM:
			f = &Refusal{Limit: lim, Of: "output tokens", Used: used.output, Max: lim.OutputTPM}
		}
		if f != nil {
			// The oldest second this replica counted leaves the minute
			// then; counted only by others, try again after a round.
			f.RetryAfter = Every
			if oldest != 0 {
				f.RetryAfter = time.Unix(oldest+60, 0).Sub(now)
			}
			f.RetryAfter = max(f.RetryAfter, time.Second)
			return f
		}
	}
	for _, k := range keys[:n] {
		if r := l.ringLocked(k, enrolled); r != nil {
			r.add(sec, slot{req: 1})
		}
	}
	return nil
}

// Charge counts a settled call's tokens against the limits of box,
// enrolled at created, and principal; nothing for a box enrolled before
// the one whose requests the limit counts here (see Admit).
func (l *Limiter) Charge(box string, created time.Time, principal string, input, output int64) {
	if input <= 0 && output <= 0 {
		return
	}
	keys, n := keysOf(box, principal)
	_, has := l.limitsOf(keys, n)
	if !has[0] && !has[1] {
		return
	}
	sec := l.cfg.Now().Unix()
	enrolled := created.UnixMicro()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range keys[:n] {
		if !has[i] {
			continue
		}
		if r := l.ringLocked(k, enrolled); r != nil {
			r.add(sec, slot{input: input, output: output})
		}
	}
}

// keysOf is the keys whose limits a call of box paid by principal ("" for
// none) counts against, the box's first: keys[:n].
func keysOf(box, principal string) (keys [2]key, n int) {
	keys = [2]key{{box, ""}, {box, principal}}
	if principal == "" {
		return keys, 1
	}
	return keys, 2
}

// limitsOf is the limits of keys[:n] as last read, and which of them
// has one, read without the lock.
func (l *Limiter) limitsOf(keys [2]key, n int) (lims [2]store.RateLimit, has [2]bool) {
	limits := *l.limits.Load()
	for i, k := range keys[:n] {
		lims[i], has[i] = limits[k]
	}
	return lims, has
}

// ringLocked is k's counts for the box enrolled at enrolled, made on
// first use, and made afresh for a box enrolled after the one counted
// (added under the name of one removed); nil when no limit of k is
// known, or for a box enrolled before the one counted.
// A key's ring stands only while the limits hold the key: Round drops
// the others' under the same lock.
func (l *Limiter) ringLocked(k key, enrolled int64) *ring {
	r := l.local[k]
	switch {
	case r != nil && r.enrolled == enrolled:
		return r
	case r != nil && r.enrolled > enrolled:
		return nil
	}
	if _, ok := (*l.limits.Load())[k]; !ok {
		return nil
	}
	r = &ring{enrolled: enrolled}
	l.local[k] = r
	return r
}

// Run reads the limits and, with Exchange, exchanges counts now and every
// Every until ctx ends.
func (l *Limiter) Run(ctx context.Context) {
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		if err := l.Round(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("ratelimit: limits or counts not exchanged; the last ones read hold meanwhile", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round reads the limits and, with Exchange, writes this replica's counts
// and reads the others'.
func (l *Limiter) Round(ctx context.Context) error {
	ls, err := l.cfg.Store.ListRateLimits(ctx, "")
	if err != nil {
		return err
	}
	limits := make(map[key]store.RateLimit, len(ls))
	for _, lim := range ls {
		limits[key{lim.Box, lim.Principal}] = lim
	}
	now := l.cfg.Now()
	sec := now.Unix()
	var mine []store.RateCount
	l.mu.Lock()
	l.limits.Store(&limits)
	for k, r := range l.local {
		if _, ok := limits[k]; !ok {
			delete(l.local, k)
			continue
		}
		if s, oldest := r.sum(sec); oldest != 0 || l.cfg.Exchange {
			mine = append(mine, store.RateCount{Key: counter{k, r.enrolled}.String(), Requests: s.req, InputTokens: s.input, OutputTokens: s.output})
		}
	}
	l.mu.Unlock()
	if !l.cfg.Exchange {
		return nil
	}
	// Another replica's row counts while it was written within two
	// rounds, by the store's clock: one that stopped writing no longer
	// counts, and one whose clock is off by seconds still does.
	others, err := l.cfg.Store.ExchangeRates(ctx, l.cfg.Replica, mine, 2*Every)
	if err != nil {
		return err
	}
	remote := make(map[counter]slot)
	for _, c := range others {
		k, ok := parseCounter(c.Key)
		if !ok {
			continue
		}
		s := remote[k]
		s.plus(slot{req: c.Requests, input: c.InputTokens, output: c.OutputTokens})
		remote[k] = s
	}
	l.mu.Lock()
	l.remote = remote
	l.mu.Unlock()
	return nil
}

// parseCounter reads a counter as counter.String writes it.
func parseCounter(s string) (counter, bool) {
	box, rest, ok := strings.Cut(s, " ")
	principal, at, ok2 := strings.Cut(rest, " ")
	enrolled, err := strconv.ParseInt(at, 10, 64)
	return counter{key{box, principal}, enrolled}, ok && ok2 && err == nil
}
