package deadline

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/intentius/boxbroker/internal/store"
)

// Connector is c with every operation of the connections it makes (connect,
// prepare, exec, query, rows.Next, begin, commit, rollback, ping) run
// through around. A connection whose operation around abandoned is
// reported invalid, so that database/sql's pool drops it, and is closed
// once the operation ends. The optional interfaces of the driver's
// connections are forwarded (a driver's connection that lacks one makes
// the wrapper answer driver.ErrSkip where database/sql then falls back).
// Under a Bound, a connection's operations run on its worker, one
// goroutine for the connection's life, and a result set's rows come from
// the driver a batch at a time, each batch one bounded operation.
// around nil is c itself.
func Connector(c driver.Connector, around Around) driver.Connector {
	if around == nil {
		return c
	}
	return &connector{c: c, around: around}
}

type connector struct {
	c      driver.Connector
	around Around
}

func (c *connector) Driver() driver.Driver { return c.c.Driver() }

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	cn := &conn{around: c.around}
	cn.execute = cn.run
	err := cn.do(ctx, Op{Name: "connect", Kind: Read}, func(ctx context.Context) (err error) {
		cn.c, err = c.c.Connect(ctx)
		return err
	}, nil)
	if err != nil {
		cn.Close() // now, or once an abandoned connect ends
		return nil, err
	}
	return cn, nil
}

// The states of a connection's operation.
const (
	waiting   int32 = iota // not begun
	running                // in the driver
	returned               // returned, its results its caller's
	refused                // never to be made: the Around returned first
	abandoned              // the Around returned first: its results are not read
	dropped                // abandoned and ended, what it made closed
)

// conn is a driver.Conn whose operations run through around. An
// operation under a Bound runs on the connection's worker, one goroutine
// for the connection's life, while its caller waits for it or for its
// deadline.
type conn struct {
	c      driver.Conn
	around Around
	// state, f and drop are the operation under way: who its results
	// are for (the caller of the Around it runs through, unless that
	// returned first), what it does, and what closes what it made once
	// an abandoned one ends. execute is c.run, made once.
	state   atomic.Int32
	f       func(context.Context) error
	drop    func()
	execute func(context.Context) error

	// bad is set once an operation was abandoned: the driver may still
	// be in it, and the connection is not used again.
	bad atomic.Bool
	mu  sync.Mutex // guards closed, later, the worker's start and an abandoned operation's end
	// closed is set by Close, which closes c unless an abandoned
	// operation runs on it: then that operation's end does.
	closed bool
	// later are the closes of c's statements and rows asked for while
	// an abandoned operation ran on c: made before c is closed.
	later []func() error
	// jobs, reply and quit are the worker's: the calls it makes, their
	// answers, and Close's word to stop; nil until the first.
	jobs  chan job
	reply chan error
	quit  chan struct{}
	// busy is set while the worker makes a job: a bounded call within
	// it runs on as it is.
	busy bool
	// wrote is set by a write in the transaction under way.
	wrote bool
}

type job struct {
	ctx  context.Context
	call func(context.Context) error
}

// Unwrap is the driver's connection (modernc.org/sqlite's Limit looks
// for it).
func (c *conn) Unwrap() driver.Conn { return c.c }

// do runs f, one operation on c, through around. An abandoned f's
// results are not read, c is not used again, and drop closes what f
// made once f ends. An f around never made is not abandoned.
func (c *conn) do(ctx context.Context, op Op, f func(context.Context) error, drop func()) error {
	if c.bad.Load() {
		return errGivenUp
	}
	if op.Kind == Write {
		c.wrote = true
	}
	c.state.Store(waiting)
	c.f, c.drop = f, drop
	op.on = c
	err := c.around(ctx, op, c.execute)
	switch {
	case c.state.CompareAndSwap(waiting, refused):
	case c.state.CompareAndSwap(running, abandoned) || c.state.Load() != returned:
		c.bad.Store(true)
	default:
		return err
	}
	if err == nil {
		err = driver.ErrBadConn
	}
	return err
}

// errGivenUp is what an operation on a connection given up before
// returns. It is driver.ErrBadConn, so that database/sql drops the
// connection and, outside a transaction, makes the operation on
// another; inside one (a group commit's next statement after one given
// up at its deadline, whose own error the caller may not have seen, as
// a close of rows), it is also the store's unavailability that the
// connection was given up for, not a bare "driver: bad connection".
var errGivenUp = fmt.Errorf("%w: the connection was given up at an earlier operation's deadline: %w: %w", driver.ErrBadConn, store.ErrUnavailable, ErrDeadline)

// run makes c's operation on this goroutine, unless it was refused or
// abandoned before it began, and ends it if it was abandoned meanwhile.
func (c *conn) run(ctx context.Context) error {
	if !c.state.CompareAndSwap(waiting, running) {
		c.end()
		return driver.ErrBadConn
	}
	err := c.f(ctx)
	if !c.state.CompareAndSwap(running, returned) {
		c.end()
	}
	return err
}

// start runs call on op's connection's worker (see conn), or on a
// goroutine of its own, and returns the channel its answer comes on.
func (op Op) start(ctx context.Context, call func(context.Context) error) <-chan error {
	c := op.on
	if c == nil || c.busy { // no connection's, or within its worker's job
		ch := make(chan error, 1)
		if c == nil {
			go func() { ch <- call(ctx) }()
		} else {
			ch <- call(ctx)
		}
		return ch
	}
	c.mu.Lock()
	if c.jobs == nil {
		c.jobs, c.reply, c.quit = make(chan job, 1), make(chan error, 1), make(chan struct{})
		go c.work(c.jobs, c.quit)
	}
	c.mu.Unlock()
	c.jobs <- job{ctx, call}
	return c.reply
}

// abandon says that the call start made is no longer waited for: its
// results are not read, and its connection is not used again.
func (op Op) abandon() {
	if c := op.on; c != nil {
		c.bad.Store(true)
		if !c.state.CompareAndSwap(running, abandoned) {
			c.state.CompareAndSwap(waiting, abandoned)
		}
	}
}

// work is c's worker: it makes the jobs c hands it until Close.
func (c *conn) work(jobs <-chan job, quit <-chan struct{}) {
	for {
		select {
		case j := <-jobs:
			c.busy = true
			err := j.call(j.ctx)
			c.busy = false
			c.end() // an abandoned job that never reached the driver
			c.reply <- err
		case <-quit:
			return
		}
	}
}

// end ends c's abandoned operation, if any, once: it closes what the
// operation made, then the statements and rows closed meanwhile, then c
// if it was closed. It holds c.mu throughout, so that a Close or a
// release meanwhile waits for it: the driver's connection is never
// closed under the close of one of its statements or rows.
func (c *conn) end() {
	if c.state.Load() != abandoned {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.state.CompareAndSwap(abandoned, dropped) {
		return
	}
	if c.drop != nil {
		c.drop()
	}
	for _, f := range c.later {
		_ = f()
	}
	c.later = nil
	if c.closed && c.c != nil {
		c.c.Close()
	}
}

// made runs f, one operation on c that makes a T (statement, rows,
// transaction, result), and returns what it made. What an abandoned
// operation makes is closed with drop (nil: nothing to close) once f
// returns, and never read here: an error returns the zero T.
func made[T any](c *conn, ctx context.Context, op Op, f func(context.Context) (T, error), drop func(T) error) (T, error) {
	var v, zero T
	closeMade := func() {
		if drop != nil && any(v) != nil {
			drop(v)
		}
	}
	err := c.do(ctx, op, func(ctx context.Context) (err error) {
		v, err = f(ctx)
		return err
	}, closeMade)
	if err != nil {
		if c.state.Load() == returned {
			closeMade() // it answered as its deadline passed
		}
		return zero, err
	}
	return v, nil
}

// release runs f, the close of one of c's statements or rows, now, or
// before c is closed while an abandoned operation runs on c.
func (c *conn) release(f func() error) error {
	c.mu.Lock()
	if c.state.Load() == abandoned {
		c.later = append(c.later, f)
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return f()
}

func (c *conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.quit != nil {
		close(c.quit)
	}
	if c.state.Load() == abandoned || c.c == nil {
		return nil // the abandoned operation's end closes it
	}
	return c.c.Close()
}

func (c *conn) IsValid() bool {
	if c.bad.Load() {
		return false
	}
	if v, ok := c.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) ResetSession(ctx context.Context) error {
	if c.bad.Load() {
		return driver.ErrBadConn
	}
	c.wrote = false
	if r, ok := c.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.c.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *conn) Ping(ctx context.Context) error {
	p, ok := c.c.(driver.Pinger)
	if !ok {
		return nil
	}
	return c.do(ctx, Op{Name: "ping", Kind: Read}, p.Ping, nil)
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := made(c, ctx, Op{Name: "prepare", Kind: Other, Query: query}, func(ctx context.Context) (driver.Stmt, error) {
		if p, ok := c.c.(driver.ConnPrepareContext); ok {
			return p.PrepareContext(ctx, query)
		}
		return c.c.Prepare(query)
	}, driver.Stmt.Close)
	if err != nil {
		return nil, err
	}
	return &stmt{s: s, c: c, query: query, kind: kindOf(query)}, nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var end context.CancelFunc
	t, err := made(c, ctx, Op{Name: "begin", Kind: Other}, func(ctx context.Context) (driver.Tx, error) {
		// A driver's transaction commits and rolls back on the context
		// it began with (database/sql gives Commit and Rollback none, as
		// pgx's stdlib keeps BeginTx's): end ends it once the
		// transaction's commit or rollback returns, answered or given
		// up, so that the driver stops waiting on a commit given up.
		ctx, end = context.WithCancel(ctx)
		if b, ok := c.c.(driver.ConnBeginTx); ok {
			return b.BeginTx(ctx, opts)
		}
		//lint:ignore SA1019 the driver has no BeginTx
		return c.c.Begin()
	}, nil)
	if err != nil {
		return nil, err
	}
	c.wrote = false
	return &tx{t: t, c: c, ctx: ctx, end: end}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.c.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return c.exec(ctx, query, func(ctx context.Context) (driver.Result, error) { return e.ExecContext(ctx, query, args) })
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.c.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return c.query(ctx, query, kindOf(query), func(ctx context.Context) (driver.Rows, error) { return q.QueryContext(ctx, query, args) })
}

// exec runs f, an exec of query on c (or one of its statements).
func (c *conn) exec(ctx context.Context, query string, f func(context.Context) (driver.Result, error)) (driver.Result, error) {
	return made(c, ctx, Op{Name: "exec", Kind: Write, Query: query}, f, nil)
}

// query runs f, a query on c (or one of its statements) that does
// kind, and returns its rows, whose Next runs through around.
func (c *conn) query(ctx context.Context, query string, kind Kind, f func(context.Context) (driver.Rows, error)) (driver.Rows, error) {
	r, err := made(c, ctx, Op{Name: "query", Kind: kind, Query: query}, f, driver.Rows.Close)
	if err != nil {
		return nil, err
	}
	return &rows{r: r, c: c, ctx: ctx}, nil
}

// kindOf is what a query does: a statement that begins SELECT, WITH
// (without INSERT, UPDATE or DELETE), VALUES, SHOW or PRAGMA reads;
// any other writes.
func kindOf(query string) Kind {
	q := strings.TrimLeft(query, " \t\r\n(")
	word := q
	if i := strings.IndexAny(q, " \t\r\n("); i >= 0 {
		word = q[:i]
	}
	for _, w := range []string{"SELECT", "VALUES", "SHOW", "PRAGMA"} {
		if strings.EqualFold(word, w) {
			return Read
		}
	}
	if strings.EqualFold(word, "WITH") {
		u := strings.ToUpper(q)
		if !strings.Contains(u, "INSERT") && !strings.Contains(u, "UPDATE") && !strings.Contains(u, "DELETE") {
			return Read
		}
	}
	return Write
}

// The interfaces the wrappers forward.
var (
	_ driver.Connector          = (*connector)(nil)
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
	_ driver.StmtExecContext    = (*stmt)(nil)
	_ driver.StmtQueryContext   = (*stmt)(nil)
	_ driver.NamedValueChecker  = (*stmt)(nil)
)
