// Package deadline bounds every call a request makes to the store: a
// store that stops answering without refusing (packets dropped on the way
// to PostgreSQL, a frozen server, a disk that blocks) makes each call
// return store.ErrUnavailable once its deadline passes with no answer
// from the store, whatever the driver does, so that the request gets its
// 503 at once rather than waiting for the store to come back. A store
// that keeps answering other calls is busy, not gone: a call waits for
// its turn behind them (Busy deadlines at most).
//
// The bound is in one place beneath every store method: Connector wraps
// the database/sql driver's connector, so that each driver operation
// runs through a Bound's Around, and a store opener takes it as an
// option. The bound a call has rides its context (Within), the Bound's
// own by default.
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
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// Default is the default bound on one store call on the request path.
const Default = 250 * time.Millisecond

// Bound bounds the store's calls: Around, given to the store's opener
// (sqlite.WithAround, postgres.WithAround), runs each operation of the
// database/sql driver beneath the store, and each of PostgreSQL's calls
// that go to pgx itself, so that every store method, present or to come,
// is bounded in that one place. It notes the store's outages for the
// log and the readiness check. Its methods are safe for concurrent use.
type Bound struct {
	d time.Duration
	o *outage
	a *answered
	// clock is the Bound's time: the real one, or a test's.
	clock clock
	// stalls is what the watcher of this process's stalls has seen.
	stalls stalls
	// timers are Around's, stopped, for its next calls.
	timers sync.Pool
}

// clock is where a Bound reads the time and makes its timers: the real
// clock (realClock), or a test's, whose time moves only when the test
// says, so that a test of the deadline does not race the scheduler.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) timer
}

// timer is a clock's *time.Timer.
type timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// stalls follows this process's stalls (a starved CPU: it ran none of
// its goroutines for a while) while bounded calls are under way: a
// watcher goroutine, running while any call is, sets its timer every
// tick and notes when one fires late, so that a call whose deadline
// passes counts the store's silence from the end of a stall within it,
// not only from a stall seen as its own timer fires.
type stalls struct {
	calls   atomic.Int32 // bounded calls under way
	running atomic.Bool  // a watcher runs
	// end is when the last stall seen ended, in Unix nanoseconds on the
	// Bound's clock; zero for none.
	end atomic.Int64
}

// begin notes a bounded call's start, starting the watcher if none
// runs; end notes its end.
func (b *Bound) begin() {
	b.stalls.calls.Add(1)
	if !b.stalls.running.Load() && b.stalls.running.CompareAndSwap(false, true) {
		go b.watch()
	}
}

func (b *Bound) end() { b.stalls.calls.Add(-1) }

// watch is the watcher of stalls: every tick (an eighth of the Bound's
// deadline) it sets its timer again, and a timer that fired late by more
// than a tick (the process did not run it) is a stall that ended then.
// It returns once no call is under way.
func (b *Bound) watch() {
	tick := b.d / 8
	t := b.clock.NewTimer(tick)
	defer t.Stop()
	due := b.clock.Now().Add(tick)
	for {
		<-t.C()
		now := b.clock.Now()
		if now.Sub(due) > tick {
			b.stalls.end.Store(now.UnixNano())
		}
		if b.stalls.calls.Load() == 0 {
			b.stalls.running.Store(false)
			// A call begun as the watcher stopped may have seen it
			// running: it is watched still.
			if b.stalls.calls.Load() == 0 || !b.stalls.running.CompareAndSwap(false, true) {
				return
			}
		}
		due = now.Add(tick)
		t.Reset(tick)
	}
}

// realClock is the real time.
type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) timer { return realTimer{time.NewTimer(d)} }

// realTimer is a *time.Timer (one pointer: held in an interface, it
// allocates nothing).
type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
func (r realTimer) Stop() bool                 { return r.t.Stop() }

// outage is what a Bound knows of the store's answering, so that an
// outage is logged once, whichever call saw it. Reads and writes are
// followed apart: a store that answers reads and refuses writes (a
// read-only PostgreSQL, SQLite files made immutable) is in an outage
// until a write succeeds, whatever the reads do.
type outage struct {
	log *slog.Logger
	now func() time.Time

	// active is set while a read or write fails: a call that
	// answers while it is not need not take mu.
	active atomic.Bool

	mu     sync.Mutex
	down   time.Time // when the outage began; zero while the store answers
	failed int       // calls that failed in this outage
	last   error     // why the first call of the outage failed
	// reads and writes are each kind of call's state.
	reads, writes side
}

// side is one kind of call's state: since when it has failed (zero while
// it answers), the first failure's error, and whether it failed in this
// outage.
type side struct {
	down   time.Time
	last   error
	failed bool
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

// New is a Bound of d on each call (Default when d is zero or less),
// unless the call's context says otherwise (Within). Outages are logged
// to log (slog.Default() when nil).
func New(d time.Duration, log *slog.Logger) *Bound {
	return newOn(d, log, realClock{})
}

// newOn is New on the clock c.
func newOn(d time.Duration, log *slog.Logger, c clock) *Bound {
	if d <= 0 {
		d = Default
	}
	if log == nil {
		log = slog.Default()
	}
	return &Bound{d: d, o: &outage{log: log, now: c.Now}, a: &answered{}, clock: c}
}

// within is the context key of Within's bound.
type within struct{}

// Within is ctx with the bound d on the store calls made with it, in
// place of the Bound's own: a longer one for writes made off the request
// path (audit batches, settlements), which may take longer than a
// request's reads. d zero or less: the calls are not bounded at all (the
// admin API's and the owner's page's, whose reports may take seconds).
func Within(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, within{}, d)
}

// bound is the bound on a call made with ctx, and whether it has one.
func (b *Bound) bound(ctx context.Context) (time.Duration, bool) {
	if d, ok := ctx.Value(within{}).(time.Duration); ok {
		return d, d > 0
	}
	return b.d, true
}

// Progress records that the store beneath made progress on calls in
// flight that have not returned yet (a write of a group commit made, not
// yet committed): calls waiting behind it wait on a store that works.
func (b *Bound) Progress() { b.a.note(b.clock.Now()) }

// starved reports whether a goroutine that yields waits longer than
// lag for its next turn to run: the process has more to run than its
// CPUs can (thousands of requests at once on two cores), and a store
// call's goroutine waits as long for each of its turns.
func (b *Bound) starved(lag time.Duration) bool {
	began := b.clock.Now()
	runtime.Gosched()
	return b.clock.Now().Sub(began) > lag
}

// Deadline is the bound on one call whose context names none.
func (b *Bound) Deadline() time.Duration { return b.d }

// ErrDeadline is what a call that passed its deadline returns, wrapped
// with store.ErrUnavailable.
var ErrDeadline = errors.New("no answer within the store deadline")

// Busy is how many deadlines a call may wait, at most, while the store
// keeps answering other calls: a store under load, whose calls queue
// behind each other (one SQLite writer, a pool's connections, a busy
// CPU or disk), is not a store that has stopped.
const Busy = 40

// answered is when the store last answered a call, in Unix nanoseconds.
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

// Around runs call, the operation op, and returns its error, or
// store.ErrUnavailable wrapping ErrDeadline once the call's deadline has
// passed with no answer from the store, to this call or any other, since
// the call began: a store that keeps answering others is busy, not gone,
// and the call waits for its turn, but no longer than Busy deadlines. A
// deadline in which this process itself was not running its goroutines
// (its timer fired half a deadline or more late, or a goroutine that
// yields waits a quarter of a deadline for its turn) is not counted as
// the store's silence, nor is a stall of the process within the call's
// wait (see stalls): the silence is counted from its end. call's
// context ends when Around gives up; Around returns then even when call
// does not (a driver blocked where it does not look at its context):
// call then finishes alone, on its connection's worker (see Connector)
// or a goroutine of its own.
// An error wrapping store.ErrUnavailable is an outage's (of reads or of
// writes, as op says); any other answer ends one.
func (b *Bound) Around(ctx context.Context, op Op, call func(context.Context) error) error {
	d, ok := b.bound(ctx)
	if !ok {
		return call(ctx)
	}
	// call's context ends when its caller's does or when Around gives
	// up (both below), and never otherwise: what the driver makes with
	// it (a transaction, rows) outlives the call.
	b.begin()
	defer b.end()
	parent := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	giveUp := func() { op.abandon(); cancel() }
	ch := op.start(ctx, call)
	// The store's silence is counted from from: the call's beginning,
	// or the last moment this process was seen not to run (see below).
	// One timer serves both bounds: the next moment the store may have
	// been silent a whole deadline, or Busy deadlines after began.
	began := b.clock.Now()
	from, due := began, began.Add(d)
	t, _ := b.timers.Get().(timer)
	if t == nil {
		t = b.clock.NewTimer(d)
	} else {
		t.Reset(d)
	}
	defer func() { t.Stop(); b.timers.Put(t) }()
	reset := func(now time.Time, next time.Duration) {
		if rest := began.Add(Busy * d).Sub(now); rest < next {
			next = rest
		}
		due = now.Add(next)
		t.Reset(next)
	}
	var err error
	late, bound := false, d
	for done := false; !done; {
		select {
		case err = <-ch:
			done = true
		case <-t.C():
			now := b.clock.Now()
			if now.Sub(began) >= Busy*d {
				late, done, bound = true, true, Busy*d
				break
			}
			if now.Sub(due) > d/2 || b.starved(d/4) {
				// The timer fired long after it was due, or goroutines
				// wait long for their turn to run: this process did not
				// run its store calls (a starved CPU), and the store's
				// silence meanwhile says nothing of the store.
				now = b.clock.Now()
				from = now
				reset(now, d)
				continue
			}
			// A stall within the call's wait (see stalls) is this
			// process's silence, not the store's: it is counted from
			// the stall's end.
			if end := b.stalls.end.Load(); end > from.UnixNano() {
				from = time.Unix(0, end)
			}
			// Silent for a whole deadline: the store answered nothing
			// since from, or since its last answer.
			quiet := now.Sub(from)
			if at := b.a.at.Load(); at > from.UnixNano() {
				quiet = now.Sub(time.Unix(0, at))
			}
			if quiet < d {
				reset(now, d-quiet)
				continue
			}
			late, done = true, true
		case <-parent.Done():
			late, done = true, true
		}
		if late {
			select {
			case err = <-ch: // it answered as the deadline passed
			default:
				giveUp()
				err = context.DeadlineExceeded
			}
		}
	}
	if parent.Err() != nil {
		if err == context.DeadlineExceeded {
			err = parent.Err()
		}
		return err // the caller's own context ended: not the store's fault
	}
	if err != nil && late &&
		!errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrExists) && !errors.Is(err, store.ErrRejected) {
		err = fmt.Errorf("%s: %w: %w (%s)", op.Name, store.ErrUnavailable, ErrDeadline, bound)
	}
	down := err != nil && errors.Is(err, store.ErrUnavailable)
	if !down {
		b.a.note(b.clock.Now())
	}
	if op.Kind != Other && (down || b.o.active.Load()) {
		b.o.note(op.Kind == Write, down, err, d)
	}
	return err
}

// note records whether the store answered a call named op, logging an
// outage's start and end: one line as the first read or write fails, one
// more (once) if reads fail in an outage that began with writes, and one
// as reads and writes both answer again.
func (s *outage) note(write, down bool, err error, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sd := &s.reads
	if write {
		sd = &s.writes
	}
	switch {
	case down && sd.down.IsZero():
		sd.down, sd.last = s.now(), err
	case !down:
		sd.down, sd.last = time.Time{}, nil
	}
	s.active.Store(!s.reads.down.IsZero() || !s.writes.down.IsZero())
	first := down && !sd.failed // this kind's first failure in the outage
	sd.failed = sd.failed || down
	switch {
	case down && s.down.IsZero():
		s.down, s.failed, s.last = s.now(), 1, err
		msg := MsgNotAnswering
		if write {
			msg = MsgNoWrites
		}
		s.log.Warn(msg, "since", s.down.UTC().Format(time.RFC3339Nano), "deadline", d.String(), "err", err)
	case down:
		s.failed++
		if !write && first {
			s.log.Warn(MsgNotAnswering, "since", s.down.UTC().Format(time.RFC3339Nano), "deadline", d.String(), "err", err)
		}
	case !s.down.IsZero() && s.reads.down.IsZero() && s.writes.down.IsZero():
		end := s.now()
		failed := "reads"
		switch {
		case s.reads.failed && s.writes.failed:
			failed = "reads and writes"
		case s.writes.failed:
			failed = "writes"
		}
		s.log.Warn(MsgAnswering,
			"since", s.down.UTC().Format(time.RFC3339Nano), "until", end.UTC().Format(time.RFC3339Nano),
			"outage", end.Sub(s.down).Round(time.Millisecond).String(), "failed_calls", s.failed, "failed", failed, "first_err", s.last)
		s.down, s.failed, s.last = time.Time{}, 0, nil
		s.reads.failed, s.writes.failed = false, false
	}
}

// WritesFailing reports since when the store's writes have failed
// (store.ErrUnavailable: refused, or no answer within the deadline),
// and the first failure's error; the zero time while the last write
// succeeded or was answered.
func (b *Bound) WritesFailing() (time.Time, error) {
	b.o.mu.Lock()
	defer b.o.mu.Unlock()
	return b.o.writes.down, b.o.writes.last
}

// Kind is what a driver operation does, for the outage log: a store
// that answers reads and refuses writes is followed apart.
type Kind int

const (
	// Other is an operation that neither reads nor writes on its own
	// (begin, rollback, closing rows): it is bounded, and its answer
	// counts as the store's, but its failure is not an outage's.
	Other Kind = iota
	// Read is a query, a ping or a new connection.
	Read
	// Write is an exec, a query that changes rows, or the commit of a
	// transaction that wrote.
	Write
)

// Op names one driver operation and says what it does.
type Op struct {
	Name string
	Kind Kind
	// Query is the statement of an exec, a query or a prepare ("" for
	// any other operation); never its arguments.
	Query string
	// on is the connection the operation is made on, whose worker makes
	// it under a bound; nil (a new connection, a call of the store's
	// own): a goroutine of its own does.
	on *conn
}

// Around runs call, one driver operation, and returns its error. It may
// return before call does (an error then): the operation is abandoned,
// its connection is discarded once it ends, and whatever it made (a
// connection, rows) is closed. call's context ends when Around returns.
type Around func(ctx context.Context, op Op, call func(context.Context) error) error

// Chain is outer around inner: outer's call is inner's.
func Chain(outer, inner Around) Around {
	if inner == nil {
		return outer
	}
	if outer == nil {
		return inner
	}
	return func(ctx context.Context, op Op, call func(context.Context) error) error {
		return outer(ctx, op, func(ctx context.Context) error { return inner(ctx, op, call) })
	}
}

// Unavailable is an Around that gives the driver's errors that
// translate (a store's translation of its driver's errors into the
// store's sentinels) takes for store.ErrUnavailable that sentinel (kept
// beside the driver's error), so that a Bound outside it takes them for
// an outage. The end of rows (io.EOF), driver.ErrSkip, driver.ErrBadConn
// and a context's end are left as they are: database/sql compares some
// of them itself, and a context's end is the Bound's to judge.
func Unavailable(translate func(op string, err error) error) Around {
	return func(ctx context.Context, op Op, call func(context.Context) error) error {
		err := call(ctx)
		if err == nil || err == io.EOF || errors.Is(err, driver.ErrSkip) || errors.Is(err, driver.ErrBadConn) ||
			errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable) {
			return err
		}
		if errors.Is(translate("", err), store.ErrUnavailable) {
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
}

// Later is a that runs each operation as it is (nil a: always) until on
// is called, and through a from then on: a store's opener makes its
// migrations and first statements unbounded, and bounds what follows.
func Later(a Around) (later Around, on func()) {
	var started atomic.Bool
	return func(ctx context.Context, op Op, call func(context.Context) error) error {
		if a == nil || !started.Load() {
			return call(ctx)
		}
		return a(ctx, op, call)
	}, func() { started.Store(true) }
}
