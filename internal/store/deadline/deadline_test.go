package deadline_test

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// queueDriver is a database/sql driver whose execs are made one at a
// time, each taking each: a healthy store with one writer, busy. The
// exec of "stuck" never answers, nor does any while frozen is set; each
// such exec sends on blocked, when set, as it blocks.
type queueDriver struct {
	each    time.Duration
	mu      sync.Mutex // one exec at a time
	frozen  atomic.Bool
	blocked chan struct{}
}

func (q *queueDriver) exec(query string) error {
	if q.frozen.Load() || query == "stuck" {
		if q.blocked != nil {
			q.blocked <- struct{}{}
		}
		select {} // a driver blocked where it does not look at its context
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	time.Sleep(q.each)
	return nil
}

// open is a database/sql handle on ex, each operation bounded by b.
func open(t *testing.T, b *deadline.Bound, ex func(query string) error) *sql.DB {
	db := sql.OpenDB(deadline.Connector(execConnector{ex}, b.Around))
	t.Cleanup(func() { db.Close() })
	return db
}

// execConnector makes connections whose every exec is ex.
type execConnector struct{ ex func(query string) error }

func (c execConnector) Connect(context.Context) (driver.Conn, error) { return execConn(c), nil }
func (c execConnector) Driver() driver.Driver                        { return nil }

type execConn struct{ ex func(query string) error }

func (execConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no statements") }
func (execConn) Close() error                        { return nil }
func (execConn) Begin() (driver.Tx, error)           { return nil, errors.New("no transactions") }
func (c execConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), c.ex(query)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestDeadline_BusyStoreAnswers makes more reservations at once than a
// store with one writer makes within one deadline: each waits its turn
// behind the others while the store keeps answering, and none is taken
// for an outage.
func TestDeadline_BusyStoreAnswers(t *testing.T) {
	const d, calls = 100 * time.Millisecond, 20
	q := &queueDriver{each: 20 * time.Millisecond} // the last answers after 400 ms
	var log bytes.Buffer                           // a TextHandler writes each line whole, under its lock
	b := deadline.New(d, slog.New(slog.NewTextHandler(&log, nil)))
	db := open(t, b, q.exec)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.ExecContext(context.Background(), "busy")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Exec(%d of %d) on a store answering one every %v = %v, want nil", i, calls, q.each, err)
		}
	}
	if log.Len() != 0 {
		t.Errorf("a busy store that answered every call was logged as an outage:\n%s", log.String())
	}
}

// answer is what an Exec returned, and when on its Bound's clock.
type answer struct {
	err error
	at  time.Time
}

// execOn makes the Exec of query on db, whose Bound runs on clk, and
// sends its answer on the channel returned once it returns.
func execOn(clk *deadline.FakeClock, db *sql.DB, query string) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		_, err := db.ExecContext(context.Background(), query)
		done <- answer{err, clk.Now()}
	}()
	return done
}

// settle waits until the Bound on clk has done what clk's last move
// made it do for the Exec answering on done, the only call under way
// besides the test's own: it returned (its answer and true), or it
// waits for its timer, and the Bound's watcher of stalls for its own
// (false). As clk moves only by the test's Advance, an Exec that has not
// returned when settle says false cannot return before the test's next
// Advance.
func settle(t *testing.T, clk *deadline.FakeClock, done <-chan answer) (answer, bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Microsecond) {
		select {
		case a := <-done:
			return a, true
		default:
		}
		if clk.Armed() == 2 {
			return answer{}, false
		}
		if time.Now().After(end) {
			t.Fatal("the Exec neither returned nor waited for its deadline in a minute")
		}
	}
}

// blockedIn waits until the driver blocks in an exec of q's, and the
// Bound on clk waits for it.
func blockedIn(t *testing.T, q *queueDriver, clk *deadline.FakeClock, done <-chan answer) {
	t.Helper()
	select {
	case <-q.blocked:
	case a := <-done:
		t.Fatalf("Exec = %v before the driver blocked, want it to block", a.err)
	case <-time.After(time.Minute):
		t.Fatal("the driver did not block in its exec in a minute")
	}
	if a, ok := settle(t, clk, done); ok {
		t.Fatalf("Exec = %v as soon as the driver blocked, want it to wait for its deadline", a.err)
	}
}

// TestDeadline_FrozenStoreRefusedAtDeadline is the outage's promise: a
// store that answers nothing makes a call fail with ErrDeadline one
// deadline after it began, not the longer wait a busy store is given.
// The Bound runs on a fake clock, so that the deadline passes when the
// test says and not when a loaded machine gets round to it (a starved
// process's delays are rightly not counted as the store's silence, and
// made the real-time form of this test wait several deadlines).
func TestDeadline_FrozenStoreRefusedAtDeadline(t *testing.T) {
	const d = 100 * time.Millisecond
	clk, began, done := frozenExec(t, d)
	a := waitOut(t, clk, done, began, d/8, d-time.Millisecond)
	if !errors.Is(a.err, deadline.ErrDeadline) || !errors.Is(a.err, store.ErrUnavailable) {
		t.Errorf("Exec on a frozen store = %v, want ErrDeadline and ErrUnavailable", a.err)
	}
	if took := a.at.Sub(began); took != d {
		t.Errorf("Exec on a frozen store returned after %v, want %v", took, d)
	}
}

// frozenExec makes an Exec on a store that answered one and then froze,
// through a Bound of d on a fake clock, and returns once the driver
// blocks in it: the clock, when the Exec began on it, and where its
// answer comes.
func frozenExec(t *testing.T, d time.Duration) (*deadline.FakeClock, time.Time, <-chan answer) {
	t.Helper()
	clk := deadline.NewFakeClock()
	q := &queueDriver{blocked: make(chan struct{}, 1)}
	db := open(t, deadline.NewOn(d, quiet(), clk), q.exec)
	if _, err := db.ExecContext(context.Background(), "busy"); err != nil {
		t.Fatalf("Exec before the freeze = %v, want nil", err)
	}
	q.frozen.Store(true)
	began := clk.Now()
	done := execOn(clk, db, "busy")
	blockedIn(t, q, clk, done)
	return clk, began, done
}

// waitOut moves clk on by step (no more than the Bound's tick, an eighth
// of its deadline, so that the Bound sees no stall) to began+not, then a
// millisecond at a time, until the Exec answering on done returns,
// failing the test if it returns by began+not, and returns its answer.
func waitOut(t *testing.T, clk *deadline.FakeClock, done <-chan answer, began time.Time, step, not time.Duration) answer {
	t.Helper()
	for {
		next := step
		switch left := began.Add(not).Sub(clk.Now()); {
		case left <= 0:
			next = time.Millisecond
		case left < step:
			next = left // stop at not itself
		}
		clk.Advance(next)
		a, ok := settle(t, clk, done)
		if ok && !a.at.After(began.Add(not)) {
			t.Fatalf("Exec = %v after %v, want it to wait past %v", a.err, a.at.Sub(began), not)
		}
		if ok {
			return a
		}
		if clk.Now().Sub(began) > 3*not {
			t.Fatalf("Exec still waits after %v", clk.Now().Sub(began))
		}
	}
}

// TestDeadline_StallIsNotTheStoresSilence: a stall of this process (its
// goroutines not run for a while: a starved CPU, all of the process's
// threads descheduled) in the middle of a call's wait is not counted as
// the store's silence, even when the process runs again well before the
// call's deadline: a frozen store's call fails one deadline after the
// stall's end. On a loaded machine such stalls, seen by nothing but the
// timer at the deadline, failed calls to a healthy store (and then the
// whole group commit they were in).
func TestDeadline_StallIsNotTheStoresSilence(t *testing.T) {
	const d = 100 * time.Millisecond
	clk, began, done := frozenExec(t, d)
	for range 2 {
		clk.Advance(d / 8)
		if a, ok := settle(t, clk, done); ok {
			t.Fatalf("Exec on a frozen store = %v after %v, want it to wait", a.err, a.at.Sub(began))
		}
	}
	clk.Advance(d / 2) // the stall: nothing ran for half a deadline
	if a, ok := settle(t, clk, done); ok {
		t.Fatalf("Exec on a frozen store = %v after %v, as a stall ended, want it to wait", a.err, a.at.Sub(began))
	}
	stallEnd := clk.Now().Sub(began)
	a := waitOut(t, clk, done, began, d/8, stallEnd+d-time.Millisecond)
	if !errors.Is(a.err, deadline.ErrDeadline) {
		t.Errorf("Exec on a frozen store = %v, want ErrDeadline", a.err)
	}
	if took := a.at.Sub(began); took != stallEnd+d {
		t.Errorf("Exec on a frozen store returned after %v, want %v: a deadline after the stall ended at %v", took, stallEnd+d, stallEnd)
	}
}

// TestDeadline_StuckCallBoundedWhileOthersAnswer: a call the store never
// answers, while it answers every other, still ends, after Busy
// deadlines, and not before. The Bound runs on a fake clock moved an
// eighth of a deadline at a time, the store answering one other call
// after each move: on wall time, other callers starved of the CPU left
// the store silent for a deadline and the stuck call ended early.
func TestDeadline_StuckCallBoundedWhileOthersAnswer(t *testing.T) {
	const d = 100 * time.Millisecond
	clk := deadline.NewFakeClock()
	q := &queueDriver{blocked: make(chan struct{}, 1)}
	db := open(t, deadline.NewOn(d, quiet(), clk), q.exec)
	began := clk.Now()
	done := execOn(clk, db, "stuck")
	blockedIn(t, q, clk, done)
	var a answer
	for steps := 1; ; steps++ {
		clk.Advance(d / 8)
		var ok bool
		if a, ok = settle(t, clk, done); ok {
			break
		}
		if steps > 16*deadline.Busy {
			t.Fatalf("Exec never answered still waits after %v, want it ended after %v", clk.Now().Sub(began), deadline.Busy*d)
		}
		if _, err := db.ExecContext(context.Background(), "busy"); err != nil {
			t.Fatalf("Exec beside the one never answered = %v, want nil", err)
		}
	}
	if !errors.Is(a.err, deadline.ErrDeadline) {
		t.Errorf("Exec never answered = %v, want ErrDeadline", a.err)
	}
	if took := a.at.Sub(began); took != deadline.Busy*d {
		t.Errorf("Exec never answered returned after %v, want %v", took, deadline.Busy*d)
	}
}

// slowDriver answers an exec after took, calling progress (when set)
// every tick meanwhile, as a group commit's writes are made one by one
// before it commits.
type slowDriver struct {
	took, tick time.Duration
	progress   func()
}

func (s *slowDriver) exec(string) error {
	end := time.Now().Add(s.took)
	for time.Now().Before(end) {
		time.Sleep(s.tick)
		if s.progress != nil {
			s.progress()
		}
	}
	return nil
}

// TestDeadline_ProgressIsAnAnswer: a call the store takes three
// deadlines to answer, while it reports progress on it, is not an
// outage; without progress it is.
func TestDeadline_ProgressIsAnAnswer(t *testing.T) {
	const d = 100 * time.Millisecond
	tests := []struct {
		name     string
		progress bool
		want     error
	}{
		{"progress", true, nil},
		{"silent", false, deadline.ErrDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &slowDriver{took: 3 * d, tick: d / 5}
			b := deadline.New(d, quiet())
			if tt.progress {
				st.progress = b.Progress
			}
			_, err := open(t, b, st.exec).ExecContext(context.Background(), "slow")
			if !errors.Is(err, tt.want) {
				t.Errorf("Exec taking %v with progress %v = %v, want %v", st.took, tt.progress, err, tt.want)
			}
		})
	}
}

// TestConnector_AbandonedConnectionDropped: a connection whose exec was
// given up at the deadline is not used again (the pool opens another
// for the next call), and is closed once the driver returns from it.
func TestConnector_AbandonedConnectionDropped(t *testing.T) {
	const d = 50 * time.Millisecond
	release := make(chan struct{})
	var opened, closed atomic.Int32
	c := &countingConnector{ex: func(query string) error {
		if query == "stuck" {
			<-release // a driver blocked where it does not look at its context
		}
		return nil
	}, opened: &opened, closed: &closed}
	db := sql.OpenDB(deadline.Connector(c, deadline.New(d, quiet()).Around))
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "stuck"); !errors.Is(err, deadline.ErrDeadline) {
		t.Fatalf("Exec never answered = %v, want ErrDeadline", err)
	}
	if _, err := db.ExecContext(ctx, "next"); err != nil {
		t.Fatalf("Exec after one was given up = %v, want nil on a new connection", err)
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("connections opened = %d, want 2 (the abandoned one dropped)", n)
	}
	if n := closed.Load(); n != 0 {
		t.Errorf("connections closed while the driver is still in one = %d, want 0", n)
	}
	close(release)
	for end := time.Now().Add(5 * time.Second); closed.Load() == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if n := closed.Load(); n != 1 {
		t.Errorf("connections closed once the driver returned = %d, want 1", n)
	}
}

// TestConnector_GivenUpConnectionIsUnavailable: an operation on a
// connection given up at an earlier operation's deadline (here on one
// sql.Conn; in a transaction, as a group commit's next statement, alike:
// database/sql makes it on no other connection) fails with
// store.ErrUnavailable and ErrDeadline, the reason it was given up, not
// a bare "driver: bad connection"; database/sql still drops the
// connection.
func TestConnector_GivenUpConnectionIsUnavailable(t *testing.T) {
	const d = 50 * time.Millisecond
	q := &queueDriver{}
	var opened, closed atomic.Int32
	c := &countingConnector{ex: q.exec, opened: &opened, closed: &closed}
	db := sql.OpenDB(deadline.Connector(c, deadline.New(d, quiet()).Around))
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "stuck"); !errors.Is(err, deadline.ErrDeadline) {
		t.Fatalf("Exec never answered = %v, want ErrDeadline", err)
	}
	_, err = conn.ExecContext(ctx, "next")
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, deadline.ErrDeadline) || !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("Exec on the connection given up = %v, want store.ErrUnavailable, ErrDeadline and driver.ErrBadConn", err)
	}
	if _, err := db.ExecContext(ctx, "busy"); err != nil {
		t.Errorf("Exec on the pool after a connection was given up = %v, want nil", err)
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("connections opened = %d, want 2 (the one given up dropped)", n)
	}
}

// TestWithin_TheContextsBoundApplies: a call whose context carries a
// longer bound waits for an answer the Bound's own would have given up
// on; one whose context carries none is not bounded.
func TestWithin_TheContextsBoundApplies(t *testing.T) {
	const d = 50 * time.Millisecond
	t.Run("own bound", func(t *testing.T) {
		// The call is answered only once Exec has returned (or after 10 s,
		// for a Bound that never gives up), so that however late a loaded
		// machine's timer fires, it finds the call unanswered.
		release := make(chan struct{})
		db := open(t, deadline.New(d, quiet()), func(string) error {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
			return nil
		})
		_, err := db.ExecContext(context.Background(), "slow")
		close(release)
		if !errors.Is(err, deadline.ErrDeadline) {
			t.Errorf("Exec answered only after it returns = %v, want %v", err, deadline.ErrDeadline)
		}
	})
	st := &slowDriver{took: 10 * d, tick: 10 * d}
	db := open(t, deadline.New(d, quiet()), st.exec)
	tests := []struct {
		name string
		ctx  context.Context
	}{
		{"longer", deadline.Within(context.Background(), 40*d)},
		{"none", deadline.Within(context.Background(), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := db.ExecContext(tt.ctx, "slow"); err != nil {
				t.Errorf("Exec taking %v (%s) = %v, want nil", st.took, tt.name, err)
			}
		})
	}
}

// countingConnector is an execConnector that counts the connections it
// opens and those closed.
type countingConnector struct {
	ex             func(query string) error
	opened, closed *atomic.Int32
}

func (c *countingConnector) Connect(context.Context) (driver.Conn, error) {
	c.opened.Add(1)
	return &countedConn{execConn: execConn{c.ex}, closed: c.closed}, nil
}
func (c *countingConnector) Driver() driver.Driver { return nil }

type countedConn struct {
	execConn
	closed *atomic.Int32
}

func (c *countedConn) Close() error { c.closed.Add(1); return nil }

// TestConnector_StallMidRowsAbandoned: a result set whose driver stops
// answering in the middle of its rows (a Next blocked where it does not
// look at its context) ends at the deadline with ErrDeadline; the rows
// given before it are the driver's first, as it wrote them (some of
// those it answered before the stall may be lost with it); the connection is
// not handed out again while the driver is still in it, and is closed,
// with the rows, once the driver returns.
func TestConnector_StallMidRowsAbandoned(t *testing.T) {
	const d, stallAt = 50 * time.Millisecond, 100
	release := make(chan struct{})
	var opened, closed, rowsClosed atomic.Int32
	c := &rowsConnector{opened: &opened, closed: &closed, rowsClosed: &rowsClosed, stallAt: stallAt, release: release}
	db := sql.OpenDB(deadline.Connector(c, deadline.New(d, quiet()).Around))
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	rs, err := db.QueryContext(ctx, "SELECT n FROM numbers")
	if err != nil {
		t.Fatalf("Query = %v, want nil", err)
	}
	var got []int64
	began := time.Now()
	for rs.Next() {
		var n int64
		if err := rs.Scan(&n); err != nil {
			t.Fatalf("Scan = %v", err)
		}
		got = append(got, n)
		began = time.Now()
	}
	took := time.Since(began)
	if err := rs.Err(); !errors.Is(err, deadline.ErrDeadline) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("rows.Err() after a row never answered = %v, want ErrDeadline and ErrUnavailable", err)
	}
	if took > 10*d {
		t.Errorf("Next never answered returned after %v, want about %v", took, d)
	}
	if len(got) == 0 || len(got) > stallAt {
		t.Errorf("rows before the stall = %d, want 1 to %d", len(got), stallAt)
	}
	for i, n := range got {
		if n != int64(i) {
			t.Fatalf("row %d before the stall = %d, want %d", i, n, i)
		}
	}
	rs.Close()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT n FROM numbers").Scan(&n); err != nil || n != 0 {
		t.Fatalf("QueryRow after a row was given up = %d, %v, want 0, nil on a new connection", n, err)
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("connections opened = %d, want 2 (the abandoned one dropped)", n)
	}
	if n, r := closed.Load(), rowsClosed.Load(); n != 0 || r != 1 {
		t.Errorf("while the driver is still in a Next: connections closed = %d, rows closed = %d, want 0 and 1 (the second query's)", n, r)
	}
	close(release)
	for end := time.Now().Add(5 * time.Second); (closed.Load() == 0 || rowsClosed.Load() < 2) && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if n, r := closed.Load(), rowsClosed.Load(); n != 1 || r != 2 {
		t.Errorf("once the driver returned: connections closed = %d, rows closed = %d, want 1 and 2", n, r)
	}
}

// rowsConnector makes connections whose every query answers the rows
// 0, 1, 2, ... 199 of one column, the first connection's first query
// blocking in its Next of row stallAt until release is closed.
type rowsConnector struct {
	opened, closed, rowsClosed *atomic.Int32
	stallAt                    int64
	release                    chan struct{}
	stalled                    atomic.Bool
}

func (c *rowsConnector) Connect(context.Context) (driver.Conn, error) {
	c.opened.Add(1)
	return &rowsConn{countedConn: countedConn{closed: c.closed}, c: c}, nil
}
func (c *rowsConnector) Driver() driver.Driver { return nil }

type rowsConn struct {
	countedConn
	c *rowsConnector
}

func (c *rowsConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	r := &numbers{c: c.c, stallAt: -1}
	if c.c.stalled.CompareAndSwap(false, true) {
		r.stallAt = c.c.stallAt
	}
	return r, nil
}

type numbers struct {
	c          *rowsConnector
	next       int64
	stallAt    int64
	closedOnce bool
}

func (r *numbers) Columns() []string { return []string{"n"} }
func (r *numbers) Close() error {
	if !r.closedOnce {
		r.closedOnce = true
		r.c.rowsClosed.Add(1)
	}
	return nil
}
func (r *numbers) Next(dest []driver.Value) error {
	if r.next == r.stallAt {
		<-r.c.release // a driver blocked where it does not look at its context
	}
	if r.next >= 200 {
		return io.EOF
	}
	dest[0] = r.next
	r.next++
	return nil
}

// TestConnector_AbandonedEndsBeforeItsConnectionCloses: a statement
// closed while an abandoned operation still runs on its connection is
// closed when the driver returns, and the connection closed after that
// close, however late the connection's own Close comes: a driver's
// connection closed under the close of one of its statements is a
// crash in the pure-Go SQLite (a finalize on a freed handle).
func TestConnector_AbandonedEndsBeforeItsConnectionCloses(t *testing.T) {
	const d = 50 * time.Millisecond
	c := &stallConnector{release: make(chan struct{}), stmtClosing: make(chan struct{}), letStmtClose: make(chan struct{}), stmtClosed: make(chan struct{}), connClosing: make(chan struct{})}
	db := sql.OpenDB(deadline.Connector(c, deadline.New(d, quiet()).Around))
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := conn.PrepareContext(ctx, "SELECT n")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := st.QueryContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
	}
	if err := rs.Err(); !errors.Is(err, deadline.ErrDeadline) {
		t.Fatalf("rows.Err() of a Next never answered = %v, want ErrDeadline", err)
	}
	rs.Close()
	st.Close() // the driver is still in its Next: the close waits for it
	close(c.release)
	<-c.stmtClosing // the abandoned Next returned, and its end closes the statement
	closed := make(chan struct{})
	go func() { conn.Close(); close(closed) }()
	select {
	case <-c.connClosing: // closed under the statement's close
	case <-time.After(200 * time.Millisecond):
	}
	close(c.letStmtClose)
	<-c.stmtClosed
	<-closed
	for end := time.Now().Add(5 * time.Second); !c.connClosed.Load() && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if !c.connClosed.Load() {
		t.Fatal("the abandoned connection was never closed")
	}
	if c.stmtUnderClosedConn.Load() {
		t.Error("the connection was closed while its statement's close ran")
	}
}

// stallConnector makes one connection whose statement's rows stall in
// their first Next until release is closed, and whose statement's Close
// says it began (stmtClosing), waits for letStmtClose, and says it
// ended (stmtClosed).
type stallConnector struct {
	release, stmtClosing, letStmtClose, stmtClosed, connClosing chan struct{}
	closing, connClosed, stmtUnderClosedConn                    atomic.Bool
}

func (c *stallConnector) Connect(context.Context) (driver.Conn, error) { return (*stallConn)(c), nil }
func (c *stallConnector) Driver() driver.Driver                        { return nil }

type stallConn stallConnector

func (c *stallConn) Prepare(string) (driver.Stmt, error) { return (*stallStmt)(c), nil }
func (c *stallConn) Begin() (driver.Tx, error)           { return nil, errors.New("no transactions") }
func (c *stallConn) Close() error {
	if !c.closing.Swap(true) {
		close(c.connClosing)
	}
	println("conn close")
	c.connClosed.Store(true)
	return nil
}

type stallStmt stallConnector

func (s *stallStmt) NumInput() int                              { return -1 }
func (s *stallStmt) Exec([]driver.Value) (driver.Result, error) { return nil, errors.New("no exec") }
func (s *stallStmt) Query([]driver.Value) (driver.Rows, error) {
	return &stallRows{c: (*stallConnector)(s)}, nil
}
func (s *stallStmt) QueryContext(context.Context, []driver.NamedValue) (driver.Rows, error) {
	return &stallRows{c: (*stallConnector)(s)}, nil
}
func (s *stallStmt) Close() error {
	close(s.stmtClosing)
	<-s.letStmtClose
	println("stmt close resumes; conn closing:", s.closing.Load())
	if s.closing.Load() {
		s.stmtUnderClosedConn.Store(true)
	}
	close(s.stmtClosed)
	return nil
}

type stallRows struct{ c *stallConnector }

func (r *stallRows) Columns() []string { return []string{"n"} }
func (r *stallRows) Close() error      { return nil }
func (r *stallRows) Next([]driver.Value) error {
	<-r.c.release // a driver blocked where it does not look at its context
	return io.EOF
}

// TestConnector_CommitGivenUpEndsTheDriversWait: a commit given up at
// its deadline ends the context its transaction began with, on which a
// driver commits (pgx's stdlib does: database/sql's Commit takes none),
// so that a driver waiting for a commit's answer that never comes (a
// link that drops every packet) stops waiting, and its connection is
// closed, rather than held, with its pool's slot, until the kernel gives
// the link up.
func TestConnector_CommitGivenUpEndsTheDriversWait(t *testing.T) {
	const d = 50 * time.Millisecond
	var closed atomic.Int32
	ended := make(chan struct{})
	c := &txConnector{closed: &closed, commit: func(ctx context.Context) error {
		<-ctx.Done() // no answer: only the transaction's context ends the wait
		close(ended)
		return ctx.Err()
	}}
	db := sql.OpenDB(deadline.Connector(c, deadline.New(d, quiet()).Around))
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, deadline.ErrDeadline) {
		t.Fatalf("Commit never answered = %v, want ErrDeadline", err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the driver still waits for the commit given up 5 s after, want its transaction's context ended")
	}
	for end := time.Now().Add(5 * time.Second); closed.Load() == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if n := closed.Load(); n != 1 {
		t.Errorf("connections closed once the driver's commit returned = %d, want 1", n)
	}
}

// txConnector makes connections whose transactions commit with commit,
// given the context each began with, as pgx's stdlib does.
type txConnector struct {
	commit func(ctx context.Context) error
	closed *atomic.Int32
}

func (c *txConnector) Connect(context.Context) (driver.Conn, error) { return &txConn{c}, nil }
func (c *txConnector) Driver() driver.Driver                        { return nil }

type txConn struct{ c *txConnector }

func (*txConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no statements") }
func (c *txConn) Close() error                      { c.c.closed.Add(1); return nil }
func (*txConn) Begin() (driver.Tx, error)           { return nil, errors.New("BeginTx only") }
func (c *txConn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	return &ctxTx{ctx: ctx, commit: c.c.commit}, nil
}

type ctxTx struct {
	ctx    context.Context
	commit func(ctx context.Context) error
}

func (t *ctxTx) Commit() error   { return t.commit(t.ctx) }
func (t *ctxTx) Rollback() error { return nil }
