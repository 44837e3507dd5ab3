package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// Group commit. The writes a request waits for, and the settlements that
// follow it, are many small transactions: one process has one write
// connection, and each commit at synchronous=FULL waits for an fsync, so
// that a few thousand concurrent reservations, each in its own
// transaction, queue for seconds behind each other (and database/sql
// hands a freed connection to any of its waiters, not the first). The
// writes that arrive while a group is being written are instead written
// together as the next group: one transaction, each write under a
// savepoint of its own so that one write's failure (a budget it would
// pass) undoes only its own statements, and one commit.

// maxGroup bounds the writes made in one group, so that its callers have
// their answers every few milliseconds even when thousands wait.
const maxGroup = 256

// The statements that make each write of a group undo only its own
// statements when it fails, prepared at Open.
const (
	savepoint         = "SAVEPOINT grouped"
	savepointRelease  = "RELEASE grouped"
	savepointRollback = "ROLLBACK TO grouped"
)

var groupStatements = []string{savepoint, savepointRelease, savepointRollback}

// groupWrite is one write waiting in, or written by, a group.
type groupWrite struct {
	// ctx is the caller's: a write whose caller has gone before its group
	// begins it is not made.
	ctx context.Context
	op  string
	// fn makes the write in tx; ctx is the group's, which no caller's
	// end cancels (an interrupted statement would roll back the whole
	// group's transaction).
	fn func(ctx context.Context, tx *sql.Tx) ([]store.Change, error)
	// undo, when set, undoes fn's write in a later group when its caller
	// has gone by the time it is committed (a reservation nobody holds).
	undo func(ctx context.Context, tx *sql.Tx) ([]store.Change, error)
	err  error
	// state is pending, then done (the group has written it and set err)
	// or gone (the caller stopped waiting), whichever comes first.
	state atomic.Int32
	done  chan struct{}
}

const (
	writePending int32 = iota
	writeDone
	writeGone
)

// group gathers the writes made through Store.grouped.
type group struct {
	mu      sync.Mutex    // guards queue and running
	queue   []*groupWrite // writes waiting for the next group
	running bool          // a goroutine is writing groups
}

// grouped makes fn's write in the next group, and returns its error, or
// ctx's when ctx ends first (the write is then made or not; when made,
// undo, if set, undoes it). Errors are translated to the store's
// sentinels, prefixed with op.
func (s *Store) grouped(ctx context.Context, op string, fn, undo func(ctx context.Context, tx *sql.Tx) ([]store.Change, error)) error {
	if err := ctx.Err(); err != nil {
		return translate(op, err)
	}
	w := &groupWrite{ctx: ctx, op: op, fn: fn, undo: undo, done: make(chan struct{})}
	s.group.mu.Lock()
	s.group.queue = append(s.group.queue, w)
	lead := !s.group.running
	s.group.running = true
	s.group.mu.Unlock()
	if lead {
		go s.writeGroups()
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		if w.state.CompareAndSwap(writePending, writeGone) {
			return translate(op, ctx.Err())
		}
		<-w.done
		return w.err
	}
}

// writeGroups writes the waiting writes, group after group, until none
// waits.
func (s *Store) writeGroups() {
	for {
		s.group.mu.Lock()
		ws := s.group.queue
		if len(ws) > maxGroup {
			ws = ws[:maxGroup:maxGroup]
			s.group.queue = s.group.queue[maxGroup:]
		} else {
			s.group.queue = nil
		}
		if len(ws) == 0 {
			s.group.running = false
			s.group.mu.Unlock()
			return
		}
		s.group.mu.Unlock()
		s.writeGroup(ws)
	}
}

// writeGroup makes ws's writes in one transaction. Each write's error is
// its own; a failure of the transaction itself is every write's.
func (s *Store) writeGroup(ws []*groupWrite) {
	ctx := context.Background()
	var undo []*groupWrite
	// wrote is when the group last made a write (or began), for working.
	var wrote atomic.Int64
	wrote.Store(time.Now().UnixNano())
	if p := s.progress.Load(); p != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(patienceTick)
			defer t.Stop()
			working(*p, stop, t.C, &wrote)
		}()
	}
	err := s.WriteOn(ctx, "write group", s.w, func(tx *sql.Tx) ([]store.Change, error) {
		var changes []store.Change
		for _, w := range ws {
			if w.ctx.Err() != nil {
				w.err = translate(w.op, w.ctx.Err())
				continue
			}
			if err := s.exec(ctx, tx, savepoint); err != nil {
				return nil, err
			}
			c, err := w.fn(ctx, tx)
			if err != nil {
				w.err = translate(w.op, err)
				if err := s.exec(ctx, tx, savepointRollback); err != nil {
					return nil, err // the transaction is gone: every write fails
				}
			}
			if err := s.exec(ctx, tx, savepointRelease); err != nil {
				return nil, err
			}
			if w.err == nil {
				changes = append(changes, c...)
			}
			wrote.Store(time.Now().UnixNano())
			if p := s.progress.Load(); p != nil {
				(*p)()
			}
		}
		return changes, nil
	})
	for _, w := range ws {
		if err != nil && w.err == nil { // not made: the transaction failed
			w.err = fmt.Errorf("%s: %w", w.op, err)
		}
		if !w.state.CompareAndSwap(writePending, writeDone) && w.err == nil && w.undo != nil {
			undo = append(undo, &groupWrite{ctx: ctx, op: w.op + " (undone: its caller had gone)", fn: w.undo, done: make(chan struct{})})
		}
		close(w.done)
	}
	if len(undo) > 0 {
		s.group.mu.Lock()
		s.group.queue = append(s.group.queue, undo...)
		s.group.mu.Unlock()
	}
}

// Patience is how long a group's transaction (the wait for the write
// connection, and its commit's fsync, which a disk shared with busy
// neighbours can take hundreds of milliseconds to do) is taken for work
// under way, from its start or its last write, before the progress
// function stops being told so: a disk that blocks for longer is taken
// for a store that stopped.
const Patience = time.Second

// working calls progress at each tick until stop is closed, or until a
// tick comes Patience after the group's last write (wrote, in Unix
// nanoseconds). It is measured from the last write, not from the group's
// start: a group whose writes took a second on a starved CPU still has
// its Patience for its commit.
func working(progress func(), stop <-chan struct{}, tick <-chan time.Time, wrote *atomic.Int64) {
	for {
		select {
		case <-stop:
			return
		case now := <-tick:
			if now.Sub(time.Unix(0, wrote.Load())) > Patience {
				return
			}
			progress()
		}
	}
}

const patienceTick = 25 * time.Millisecond

// SetProgress has f called as each write of a group is made, before the
// group commits, and while a group's transaction is under way, for
// Patience at most: a bound on the store's calls (package deadline's
// Progress) so learns that calls waiting behind a long group wait on a
// store that works, as on a starved CPU, where a group of a few hundred
// writes can take a second, or on a busy disk. nil: none is called.
func (s *Store) SetProgress(f func()) {
	if f == nil {
		s.progress.Store(nil)
		return
	}
	s.progress.Store(&f)
}

// exec runs q, prepared at Open, in tx.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, q string) error {
	_, err := tx.StmtContext(ctx, s.Stmts[q]).ExecContext(ctx)
	return err
}
