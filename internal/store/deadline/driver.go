package deadline

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/intentius/boxbroker/internal/store"
)

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

// Connector is c with every operation of the connections it makes (connect,
// prepare, exec, query, rows.Next, begin, commit, rollback, ping) run
// through around. A connection whose operation around abandoned is
// reported invalid, so that database/sql's pool drops it, and is closed
// once the operation ends. The optional interfaces of the driver's
// connections are forwarded (a driver's connection that lacks one makes
// the wrapper answer driver.ErrSkip where database/sql then falls back).
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
	var dc driver.Conn
	abandoned, err := run(ctx, c.around, Op{Name: "connect", Kind: Read}, func(ctx context.Context) (err error) {
		dc, err = c.c.Connect(ctx)
		return err
	}, func() {
		if dc != nil {
			dc.Close()
		}
	})
	if abandoned || err != nil {
		return nil, err
	}
	return &conn{c: dc, around: c.around}, nil
}

// run is around(ctx, op, call), telling whether around abandoned call:
// returned while call ran. An abandoned call's results are not read;
// drop runs once it ends. A call around never made (an Around that
// refused it) is not abandoned.
func run(ctx context.Context, around Around, op Op, call func(context.Context) error, drop func()) (abandoned bool, err error) {
	const (
		waiting = iota
		running
		returned
		gone
	)
	var state atomic.Int32
	err = around(ctx, op, func(ctx context.Context) error {
		if !state.CompareAndSwap(waiting, running) {
			return driver.ErrBadConn // around returned before making it
		}
		err := call(ctx)
		if !state.CompareAndSwap(running, returned) && drop != nil {
			drop()
		}
		return err
	})
	if state.CompareAndSwap(waiting, gone) {
		if err == nil {
			err = driver.ErrBadConn
		}
		return false, err
	}
	if state.CompareAndSwap(running, gone) {
		if err == nil {
			err = driver.ErrBadConn
		}
		return true, err
	}
	return false, err
}

// conn is a driver.Conn whose operations run through around.
type conn struct {
	c      driver.Conn
	around Around

	// bad is set once an operation was abandoned: the driver may still
	// be in it, and the connection is not used again.
	bad atomic.Bool
	mu  sync.Mutex // guards stuck, closed and later
	// stuck counts abandoned operations still running on c; closed is
	// set by Close, which closes c when none is.
	stuck  int
	closed bool
	// later are the closes of c's statements and rows asked for while
	// an abandoned operation ran on c: made before c is closed.
	later []func() error
	// wrote is set by a write in the transaction under way.
	wrote bool
}

// Unwrap is the driver's connection (modernc.org/sqlite's Limit looks
// for it).
func (c *conn) Unwrap() driver.Conn { return c.c }

// do runs one operation on c through around; an abandoned one marks c
// bad, and closes c as it ends if c was closed meanwhile.
func (c *conn) do(ctx context.Context, op Op, call func(context.Context) error, drop func()) error {
	if c.bad.Load() {
		return driver.ErrBadConn
	}
	if op.Kind == Write {
		c.wrote = true
	}
	c.mu.Lock()
	c.stuck++
	c.mu.Unlock()
	abandoned, err := run(ctx, c.around, op, call, func() {
		if drop != nil {
			drop()
		}
		c.unstick()
	})
	if abandoned {
		c.bad.Store(true)
		return err
	}
	c.unstick()
	return err
}

// made runs f, one operation on c that makes a T (statement, rows,
// transaction, result), and returns what it made. What an abandoned
// operation makes is closed with drop (nil: nothing to close) once f
// returns, and never read here: an error returns the zero T.
func made[T any](c *conn, ctx context.Context, op Op, f func(context.Context) (T, error), drop func(T) error) (T, error) {
	var v, zero T
	var closeMade func()
	if drop != nil {
		closeMade = func() {
			if any(v) != nil {
				drop(v)
			}
		}
	}
	err := c.do(ctx, op, func(ctx context.Context) (err error) {
		v, err = f(ctx)
		return err
	}, closeMade)
	if err != nil {
		return zero, err
	}
	return v, nil
}

// unstick ends one operation, closing c if it was closed and none runs.
func (c *conn) unstick() {
	c.mu.Lock()
	c.stuck--
	last := c.stuck == 0 && c.closed
	later := c.later
	if last {
		c.later = nil
	}
	c.mu.Unlock()
	if last {
		for _, f := range later {
			_ = f()
		}
		c.c.Close()
	}
}

// release runs f, the close of one of c's statements or rows, now, or
// before c is closed while an abandoned operation runs on c.
func (c *conn) release(f func() error) error {
	c.mu.Lock()
	if c.stuck > 0 {
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
	if c.stuck > 0 {
		return nil // the last abandoned operation closes it
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
	t, err := made(c, ctx, Op{Name: "begin", Kind: Other}, func(ctx context.Context) (driver.Tx, error) {
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
	return &tx{t: t, c: c, ctx: ctx}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.c.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return made(c, ctx, Op{Name: "exec", Kind: Write, Query: query}, func(ctx context.Context) (driver.Result, error) {
		return e.ExecContext(ctx, query, args)
	}, nil)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.c.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := made(c, ctx, Op{Name: "query", Kind: kindOf(query), Query: query}, func(ctx context.Context) (driver.Rows, error) {
		return q.QueryContext(ctx, query, args)
	}, driver.Rows.Close)
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
}

func (t *tx) Commit() error {
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
	return made(s.c, ctx, Op{Name: "exec", Kind: Write, Query: s.query}, func(ctx context.Context) (driver.Result, error) {
		return e.ExecContext(ctx, args)
	}, nil)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.s.(driver.StmtQueryContext)
	if !ok {
		return nil, errors.New("deadline: the driver's statement has no QueryContext")
	}
	r, err := made(s.c, ctx, Op{Name: "query", Kind: s.kind, Query: s.query}, func(ctx context.Context) (driver.Rows, error) {
		return q.QueryContext(ctx, args)
	}, driver.Rows.Close)
	if err != nil {
		return nil, err
	}
	return &rows{r: r, c: s.c, ctx: ctx}, nil
}

// rows are driver.Rows whose Next runs through around. They forward
// none of the optional column-type interfaces: the store never asks
// database/sql for ColumnTypes.
type rows struct {
	r   driver.Rows
	c   *conn
	ctx context.Context
	// own is what the driver's Next writes into, copied to Next's dest
	// once it returned: an abandoned Next writes into it, never into a
	// dest database/sql reads.
	own []driver.Value
	// read is set once Next found the end: the driver has read the
	// whole answer, and Close waits on nothing the store sends.
	read bool
}

func (r *rows) Columns() []string { return r.r.Columns() }

func (r *rows) Close() error {
	if r.c.bad.Load() || r.read {
		return r.c.release(r.r.Close)
	}
	return r.c.do(context.WithoutCancel(r.ctx), Op{Name: "close rows", Kind: Other}, func(context.Context) error { return r.r.Close() }, nil)
}

func (r *rows) Next(dest []driver.Value) error {
	if len(r.own) != len(dest) {
		r.own = make([]driver.Value, len(dest))
	}
	own := r.own
	err := r.c.do(r.ctx, Op{Name: "next row", Kind: Read}, func(context.Context) error { return r.r.Next(own) }, nil)
	if err == nil {
		copy(dest, own)
	}
	r.read = err == io.EOF
	return err
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

// Unavailable is an Around that gives the driver's errors for which
// unavailable is true the sentinel store.ErrUnavailable (kept beside
// the driver's error), so that a Bound outside it takes them for an
// outage. The end of rows (io.EOF), driver.ErrSkip, driver.ErrBadConn
// and a context's end are left as they are: database/sql compares some
// of them itself, and a context's end is the Bound's to judge.
func Unavailable(unavailable func(error) bool) Around {
	return func(ctx context.Context, op Op, call func(context.Context) error) error {
		err := call(ctx)
		if err == nil || err == io.EOF || errors.Is(err, driver.ErrSkip) || errors.Is(err, driver.ErrBadConn) ||
			errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable) {
			return err
		}
		if unavailable(err) {
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
