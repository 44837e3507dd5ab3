package deadline

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"time"
)

// The transactions, statements and rows a conn hands out, each of
// whose operations runs through around as the conn's own do.

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

// Batch bounds, so that a batch takes about as long as one row. A
// result set's first batch is one row, each next one twice the last.
const (
	batchRows = 64
	batchTime = time.Millisecond
)
