// Package deadline bounds every call a request makes to the store: a
// store that stops answering without refusing (packets dropped on the way
// to PostgreSQL, a frozen server, a disk that blocks) makes each call
// return store.ErrUnavailable once its deadline passes with no answer
// from the store, whatever the driver does, so that the request gets its
// 503 at once rather than waiting for the store to come back. A store
// that keeps answering other calls is busy, not gone: a call waits for
// its turn behind them (Busy deadlines at most).
//
// It also notices outages: the first call that finds the store not
// answering writes one WARN line with the outage's start, and the call
// that finds it answering again writes one with its start, end and
// length. Reads and writes are followed apart, so that a store that
// answers reads and refuses writes is one outage, ended only once a
// write succeeds too.
package deadline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// Default is the default bound on one store call on the request path.
const Default = 250 * time.Millisecond

// Store is a store.Store whose every call is bounded by a deadline,
// except those only the admin API and the CLI make (the owner's page's
// overview and charts) and Close. It implements each method itself, so a
// method a new sub-interface adds to store.Store does not compile until
// it is given its deadline here.
type Store struct {
	st store.Store
	d  time.Duration
	o  *outage
	a  *answered
}

// Store is a store.Store: the compiler checks that every method of
// store.Store is written here, with its deadline or (for the few that are
// exempt) without one.
var _ store.Store = (*Store)(nil)

// outage is what the Stores made from one Wrap know of the store's
// answering, so that an outage is logged once, whichever bound saw it.
// Reads and writes are followed apart: a store that answers reads and
// refuses writes (a read-only PostgreSQL, SQLite files made immutable) is
// in an outage until a write succeeds, whatever the reads do.
type outage struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	down   time.Time // when the outage began; zero while the store answers
	failed int       // calls that failed in this outage
	last   error     // why the first call of the outage failed
	// reads and writes are each kind of call's state; readsLogged is
	// set once the outage's line saying reads fail is written.
	reads, writes side
	readsLogged   bool
	// kinds is what failed in this outage: "reads", "writes" or both.
	kinds map[string]bool
}

// side is one kind of call's state: since when it has failed (zero while
// it answers), and the first failure's error.
type side struct {
	down time.Time
	last error
}

// Messages of the outage's lines.
const (
	// MsgNotAnswering begins an outage in which reads fail (or is
	// written once reads fail too in an outage of writes).
	MsgNotAnswering = "store: not answering; requests that need it get 503 until it does"
	// MsgNoWrites begins an outage in which only writes fail.
	MsgNoWrites = "store: taking no writes; the records of calls answered go to the spool until it does"
	// MsgAnswering ends an outage: reads and writes succeed again.
	MsgAnswering = "store: answering again"
)

// Wrap bounds each of st's calls by d (Default when d is zero or less).
// Outages are logged to log (slog.Default() when nil).
func Wrap(st store.Store, d time.Duration, log *slog.Logger) *Store {
	if d <= 0 {
		d = Default
	}
	if log == nil {
		log = slog.Default()
	}
	return &Store{st: st, d: d, o: &outage{log: log, now: time.Now}, a: &answered{}}
}

// With is the same store bounded by d instead, noting outages with s:
// for writes made off the request path (audit batches, settlements),
// which may take longer than a request's reads.
func (s *Store) With(d time.Duration) *Store {
	return &Store{st: s.st, d: d, o: s.o, a: s.a}
}

// Progress records that the store beneath made progress on calls in
// flight that have not returned yet (a write of a group commit made, not
// yet committed): calls waiting behind it wait on a store that works.
func (s *Store) Progress() { s.a.note(time.Now()) }

// starved reports whether a goroutine that yields waits longer than
// lag for its next turn to run: the process has more to run than its
// CPUs can (thousands of requests at once on two cores), and a store
// call's goroutine waits as long for each of its turns.
func starved(lag time.Duration) bool {
	began := time.Now()
	runtime.Gosched()
	return time.Since(began) > lag
}

// Deadline is the bound on one call.
func (s *Store) Deadline() time.Duration { return s.d }

// Down reports since when the store has not answered, or the zero time
// while it answers.
func (s *Store) Down() time.Time {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	return s.o.down
}

// ErrDeadline is what a call that passed its deadline returns, wrapped
// with store.ErrUnavailable.
var ErrDeadline = errors.New("no answer within the store deadline")

// Busy is how many deadlines a call may wait, at most, while the store
// keeps answering other calls: a store under load, whose calls queue
// behind each other (one SQLite writer, a pool's connections, a busy
// CPU or disk), is not a store that has stopped.
const Busy = 40

// answered is when the store last answered a call, in Unix nanoseconds,
// for the Stores made from one Wrap.
type answered struct{ at atomic.Int64 }

// note records an answer at t, unless a later one is recorded.
func (a *answered) note(t time.Time) {
	n := t.UnixNano()
	for {
		was := a.at.Load()
		if was >= n || a.at.CompareAndSwap(was, n) {
			return
		}
	}
}

// do runs f and returns its answer, or store.ErrUnavailable wrapping
// ErrDeadline once the deadline has passed with no answer from the
// store, to this call or any other, since the call began: a store that
// keeps answering others is busy, not gone, and the call waits for its
// turn, but no longer than Busy deadlines. A deadline in which this
// process itself was not running its goroutines (its timer fired half a
// deadline or more late, or a goroutine that yields waits a quarter of a
// deadline for its turn) is not counted as the store's silence. f's context ends when do
// gives up; do returns then even when f does not (a driver blocked where
// it does not look at its context): f then finishes on its own
// goroutine, its result dropped.
func do[T any](s *Store, ctx context.Context, op string, f func(context.Context) (T, error)) (T, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, Busy*s.d)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		ch <- result{v, err}
	}()
	// The store's silence is counted from from: the call's beginning,
	// or the last moment this process was seen not to run (see below).
	from := time.Now()
	due := from.Add(s.d)
	t := time.NewTimer(s.d)
	defer t.Stop()
	var r result
	late, bound := false, s.d
	for done := false; !done; {
		select {
		case r = <-ch:
			done = true
		case <-t.C:
			now := time.Now()
			if now.Sub(due) > s.d/2 || starved(s.d/4) {
				// The timer fired long after it was due, or goroutines
				// wait long for their turn to run: this process did not
				// run its store calls (a starved CPU), and the store's
				// silence meanwhile says nothing of the store.
				now = time.Now()
				from, due = now, now.Add(s.d)
				t.Reset(s.d)
				continue
			}
			// Silent for a whole deadline: the store answered nothing
			// since from, or since its last answer.
			quiet := now.Sub(from)
			if at := s.a.at.Load(); at > from.UnixNano() {
				quiet = now.Sub(time.Unix(0, at))
			}
			if quiet < s.d {
				due = now.Add(s.d - quiet)
				t.Reset(s.d - quiet)
				continue
			}
			cancel()
			late, done = true, true
		case <-ctx.Done():
			late, done, bound = true, true, Busy*s.d
		}
		if late {
			select {
			case r = <-ch: // it answered as the deadline passed
			default:
				r.err = context.DeadlineExceeded
			}
		}
	}
	if parent.Err() != nil {
		return r.v, r.err // the caller's own context ended: not the store's fault
	}
	if r.err != nil && late &&
		!errors.Is(r.err, store.ErrNotFound) && !errors.Is(r.err, store.ErrExists) && !errors.Is(r.err, store.ErrRejected) {
		var zero T
		r.v, r.err = zero, fmt.Errorf("%s: %w: %w (%s)", op, store.ErrUnavailable, ErrDeadline, bound)
	}
	if r.err == nil || !errors.Is(r.err, store.ErrUnavailable) {
		s.a.note(time.Now())
	}
	s.o.note(op, r.err, s.d)
	return r.v, r.err
}

// note records whether the store answered a call named op, logging an
// outage's start and end: one line as the first read or write fails, one
// more (once) if reads fail in an outage that began with writes, and one
// as reads and writes both answer again.
func (s *outage) note(op string, err error, d time.Duration) {
	down := err != nil && errors.Is(err, store.ErrUnavailable)
	write := !readOp(op)
	s.mu.Lock()
	defer s.mu.Unlock()
	sd, kind := &s.reads, "reads"
	if write {
		sd, kind = &s.writes, "writes"
	}
	switch {
	case down && sd.down.IsZero():
		sd.down, sd.last = s.now(), err
	case !down:
		sd.down, sd.last = time.Time{}, nil
	}
	if down {
		if s.kinds == nil {
			s.kinds = map[string]bool{}
		}
		s.kinds[kind] = true
	}
	switch {
	case down && s.down.IsZero():
		s.down, s.failed, s.last = s.now(), 1, err
		msg := MsgNotAnswering
		if write {
			msg = MsgNoWrites
		} else {
			s.readsLogged = true
		}
		s.log.Warn(msg, "since", s.down.UTC().Format(time.RFC3339Nano), "deadline", d.String(), "err", err)
	case down:
		s.failed++
		if !write && !s.readsLogged {
			s.readsLogged = true
			s.log.Warn(MsgNotAnswering, "since", s.down.UTC().Format(time.RFC3339Nano), "deadline", d.String(), "err", err)
		}
	case !s.down.IsZero() && s.reads.down.IsZero() && s.writes.down.IsZero():
		end := s.now()
		failed := "reads"
		switch {
		case s.kinds["reads"] && s.kinds["writes"]:
			failed = "reads and writes"
		case s.kinds["writes"]:
			failed = "writes"
		}
		s.log.Warn(MsgAnswering,
			"since", s.down.UTC().Format(time.RFC3339Nano), "until", end.UTC().Format(time.RFC3339Nano),
			"outage", end.Sub(s.down).Round(time.Millisecond).String(), "failed_calls", s.failed, "failed", failed, "first_err", s.last)
		s.down, s.failed, s.last, s.readsLogged, s.kinds = time.Time{}, 0, nil, false, nil
	}
}

// readOp reports whether the call named op only reads: its name begins
// "read", "list" or "look up", or it is the ping. Every other call
// writes.
func readOp(op string) bool {
	return op == "ping" || strings.HasPrefix(op, "read ") || strings.HasPrefix(op, "list ") || strings.HasPrefix(op, "look up ")
}

// WritesFailing reports since when the store's writes have failed
// (store.ErrUnavailable: refused, or no answer within the deadline),
// and the first failure's error; the zero time while the last write
// succeeded or was answered.
func (s *Store) WritesFailing() (time.Time, error) {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	return s.o.writes.down, s.o.writes.last
}

func do0(s *Store, ctx context.Context, op string, f func(context.Context) error) error {
	_, err := do(s, ctx, op, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}
