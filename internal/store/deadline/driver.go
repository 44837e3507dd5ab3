package deadline

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

// tx is a driver.Tx whose commit and rollback run through around.
type tx struct {
	t   driver.Tx
	c   *conn
	ctx context.Context
	// end ends the context the driver's transaction began with.
	end context.CancelFunc
}

func (t *tx) Commit() error {
	defer t.end()
	kind := Read
	if t.c.wrote {
		kind = Write
	}
	err := t.c.do(t.ctx, Op{Name: "commit", Kind: kind}, func(context.Context) error { return t.t.Commit() }, nil)
	if err != nil {
		// database/sql takes the transaction for ended, whatever the
		// driver left: the connection is not used again.
		t.c.bad.Store(true)
	}
	return err
}

func (t *tx) Rollback() error {
	defer t.end()
	return t.c.do(context.WithoutCancel(t.ctx), Op{Name: "rollback", Kind: Other}, func(context.Context) error { return t.t.Rollback() }, nil)
}

// stmt is a driver.Stmt whose exec and query run through around.
type stmt struct {
	s     driver.Stmt
	c     *conn
	query string
	kind  Kind // kindOf(query)
}

func (s *stmt) Close() error { return s.c.release(s.s.Close) }

func (s *stmt) NumInput() int { return s.s.NumInput() }

func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.s.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("deadline: Stmt.Exec without a context")
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("deadline: Stmt.Query without a context")
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.s.(driver.StmtExecContext)
	if !ok {
		return nil, errors.New("deadline: the driver's statement has no ExecContext")
	}
	return s.c.exec(ctx, s.query, func(ctx context.Context) (driver.Result, error) { return e.ExecContext(ctx, args) })
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.s.(driver.StmtQueryContext)
	if !ok {
		return nil, errors.New("deadline: the driver's statement has no QueryContext")
	}
	return s.c.query(ctx, s.query, s.kind, func(ctx context.Context) (driver.Rows, error) { return q.QueryContext(ctx, args) })
}

// rows are driver.Rows whose Next runs through around, a batch of rows
// at a time. They forward none of the optional column-type interfaces:
// the store never asks database/sql for ColumnTypes.
type rows struct {
	r   driver.Rows
	c   *conn
	ctx context.Context
	// buf holds n rows the driver's Next wrote (a batch), of which Next
	// has given i; end is what the driver's Next answered after the
	// batch's last (io.EOF, an error), given once the batch is. An
	// abandoned batch writes into buf, never into a dest database/sql
	// reads.
	buf        []driver.Value
	n, i, cols int
	end        error
	// read is set once Next found the end: the driver has read the
	// whole answer, and Close waits on nothing the store sends.
	read bool
	// fill is r.batch, made once.
	fill func(context.Context) error
}

// Batch bounds, so that a batch takes about as long as one row. A
// result set's first batch is one row, each next one twice the last.
const (
	batchRows = 64
	batchTime = time.Millisecond
)

func (r *rows) Columns() []string { return r.r.Columns() }

func (r *rows) Close() error {
	if r.c.bad.Load() || r.read {
		return r.c.release(r.r.Close)
	}
	return r.c.do(context.WithoutCancel(r.ctx), Op{Name: "close rows", Kind: Other}, func(context.Context) error { return r.r.Close() }, nil)
}

// Next gives the batch's next row, or makes the next batch through
// around: the rows the driver answers while they come at once (up to
// batchRows, for batchTime), so that a result set makes one bounded
// call per batch rather than per row, and its end or error.
func (r *rows) Next(dest []driver.Value) error {
	if r.i < r.n {
		copy(dest, r.buf[r.i*r.cols:])
		r.i++
		return nil
	}
	if size := len(r.buf) / max(r.cols, 1); size < batchRows || r.cols != len(dest) {
		r.cols = len(dest)
		r.buf = make([]driver.Value, min(2*size+1, batchRows)*r.cols)
	}
	if r.fill == nil {
		r.fill = r.batch
	}
	err := r.c.do(r.ctx, Op{Name: "next row", Kind: Read}, r.fill, nil)
	if err == nil {
		copy(dest, r.buf)
		r.i = 1
	}
	r.read = err == io.EOF
	return err
}

// batch reads a batch of rows into buf, or answers the driver's end
// (or error) if it comes before any row.
func (r *rows) batch(context.Context) error {
	r.n, r.i = 0, 0
	if r.end != nil {
		return r.end
	}
	cols, size := r.cols, len(r.buf)/max(r.cols, 1)
	began := time.Now()
	for r.n < size && (r.n == 0 || time.Since(began) < batchTime) {
		if r.n > 0 { // the driver may reuse a row's bytes for the next
			for k, v := range r.buf[(r.n-1)*cols : r.n*cols] {
				if b, ok := v.([]byte); ok {
					r.buf[(r.n-1)*cols+k] = bytes.Clone(b)
				}
			}
		}
		if err := r.r.Next(r.buf[r.n*cols : (r.n+1)*cols]); err != nil {
			if r.n == 0 {
				return err
			}
			r.end = err
			break
		}
		r.n++
	}
	return nil
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
