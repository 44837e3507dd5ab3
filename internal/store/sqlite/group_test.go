package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// budgeted opens a store with the box "alpha" and a budget of limit on
// it.
func budgeted(t *testing.T, limit int64, opts ...Option) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "boxbroker.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// The box and its budget are the operator's writes, unbounded as
	// serve makes them (the admin API's), not a request's: a slow fsync
	// here is not what the tests judge.
	ctx := deadline.Within(t.Context(), 0)
	if err := s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h-alpha", CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetBudget(ctx, store.Budget{Box: "alpha", Limit: limit, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return s
}

// holdWriter takes the one write connection until release is called, and
// waitQueued waits until n writes wait for the next group.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	c, err := s.w.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return func() { c.Close() }
}

func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		s.group.mu.Lock()
		q := len(s.group.queue)
		s.group.mu.Unlock()
		if q >= n {
			return
		}
	}
	t.Fatalf("%d writes never queued", n)
}

// TestReserve_ConcurrentShareOneTransaction: reservations made while the
// writer is busy are made together, in one transaction and one commit,
// not one transaction (and one fsync) each.
func TestReserve_ConcurrentShareOneTransaction(t *testing.T) {
	s := budgeted(t, 1<<40)
	release := holdWriter(t, s)
	const n = 10
	txs := make(chan *sql.Tx, n+1)
	var wg sync.WaitGroup
	write := func() {
		defer wg.Done()
		err := s.grouped(t.Context(), "test write", func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
			txs <- tx
			return nil, nil
		}, nil)
		if err != nil {
			t.Errorf("grouped = %v, want nil", err)
		}
	}
	wg.Add(1)
	go write()                        // leads a group, and waits for the writer
	time.Sleep(20 * time.Millisecond) // it has taken the queue
	for range n {
		wg.Add(1)
		go write()
	}
	waitQueued(t, s, n)
	release()
	wg.Wait()
	close(txs)
	seen := map[*sql.Tx]int{}
	for tx := range txs {
		seen[tx]++
	}
	if len(seen) > 2 {
		t.Errorf("%d writes, %d queued behind a busy writer, made in %d transactions, want 2 at most", n+1, n, len(seen))
	}
}

// TestReserve_GoneCallersReservationReleased: a reservation whose caller
// stopped waiting (its deadline passed) while its group was being
// written is committed, then released, so that nothing stays held
// against the budget for a call that was refused.
func TestReserve_GoneCallersReservationReleased(t *testing.T) {
	s := budgeted(t, 1000)
	ctx, cancel := context.WithCancel(t.Context())
	var id int64
	err := s.grouped(ctx, "reserve", func(gctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		var err error
		id, err = sqlstore.ReserveIn(gctx, s.SpendTx(tx), store.Reservation{Box: "alpha", Month: "2026-12", Amount: 700, At: time.Now()})
		cancel()                          // the caller goes while its group is written
		time.Sleep(20 * time.Millisecond) // and is seen gone before the commit
		return nil, err
	}, func(gctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		return nil, sqlstore.ReleaseIn(gctx, s.SpendTx(tx), id)
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("grouped with its caller gone = %v, want context.Canceled", err)
	}
	var ts []store.Tally
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if ts, err = s.Tallies(t.Context(), "alpha", "2026-12"); err == nil && len(ts) == 1 && ts[0].Reserved == 0 {
			break
		}
	}
	if len(ts) != 1 || ts[0].Reserved != 0 {
		t.Errorf("Tallies after a gone caller's reservation = %+v, want reserved 0", ts)
	}
	// The budget is whole again.
	if _, err := s.Reserve(t.Context(), store.Reservation{Box: "alpha", Month: "2026-12", Amount: 1000, At: time.Now()}); err != nil {
		t.Errorf("Reserve(the whole budget) after the gone caller's was released = %v, want nil", err)
	}
}

// TestReserve_BusyWriterNotAnOutage makes many reservations at once on a
// store bounded by serve's deadline, as requests make them: the writer
// is busy, not gone, and no reservation is refused as ErrDeadline.
func TestReserve_BusyWriterNotAnOutage(t *testing.T) {
	bound := deadline.New(deadline.Default, nil)
	s := budgeted(t, 1<<40, WithAround(bound.Around))
	const n = 400
	s.SetProgress(bound.Progress) // as serve has it
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Reserve(t.Context(), store.Reservation{Box: "alpha", Month: "2026-12", Amount: 1, At: time.Now()})
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if failed == 1 {
				t.Errorf("Reserve = %v, want nil", err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d concurrent reservations on a healthy store failed, want 0", failed, n)
	}
	ts, err := s.Tallies(t.Context(), "alpha", "2026-12")
	if err != nil || len(ts) != 1 || ts[0].Reserved != n {
		t.Errorf("Tallies = %+v, %v, want reserved %d", ts, err, n)
	}
}

// TestGrouped_FailedTransactionFailsEveryWrite: when the group's
// transaction cannot be made (here, the database is closed), no write
// in it reports success.
func TestGrouped_FailedTransactionFailsEveryWrite(t *testing.T) {
	s := budgeted(t, 1000)
	if err := s.w.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Reserve(t.Context(), store.Reservation{Box: "alpha", Month: "2026-12", Amount: 1, At: time.Now()})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Reserve on a closed writer = %v, want ErrUnavailable", err)
	}
}

// TestGrouped_ProgressPerWrite: each write a group makes is reported to
// SetProgress's function before the group commits.
func TestGrouped_ProgressPerWrite(t *testing.T) {
	s := budgeted(t, 1<<40)
	var n atomic.Int64
	s.SetProgress(func() { n.Add(1) })
	const writes = 20
	var wg sync.WaitGroup
	for range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Reserve(t.Context(), store.Reservation{Box: "alpha", Month: "2026-12", Amount: 1, At: time.Now()}); err != nil {
				t.Errorf("Reserve = %v, want nil", err)
			}
		}()
	}
	wg.Wait()
	if got := n.Load(); got < writes {
		t.Errorf("progress reported %d times for %d reservations, want %d at least", got, writes, writes)
	}
}

// TestWorking_PatienceFromTheLastWrite: a group's transaction is shown to
// be under way (the progress function is called at each tick) until
// Patience after its last write, not after its start: a group whose
// writes took longer than Patience (hundreds of them on a starved CPU)
// still shows progress while it commits, so that the calls waiting
// behind it are not taken for an outage's.
func TestWorking_PatienceFromTheLastWrite(t *testing.T) {
	began := time.Unix(1_800_000_000, 0)
	var wrote atomic.Int64
	wrote.Store(began.UnixNano())
	tick, stop, done := make(chan time.Time), make(chan struct{}), make(chan struct{})
	defer close(stop)
	var calls atomic.Int64
	go func() { working(func() { calls.Add(1) }, stop, tick, &wrote); close(done) }()
	// at gives working a tick at began+d, unless it has returned.
	at := func(d time.Duration) bool {
		select {
		case tick <- began.Add(d):
			return true
		case <-done:
			return false
		}
	}
	at(Patience / 2)
	wrote.Store(began.Add(Patience + Patience/2).UnixNano()) // the group's last write
	if !at(2 * Patience) {
		t.Fatalf("working stopped before a tick half a Patience after the last write")
	}
	at(3 * Patience) // Patience and a half after the last write: it stops
	<-done
	if n := calls.Load(); n != 2 {
		t.Errorf("progress called %d times, want 2 (at Patience/2 and 2×Patience, not at 3×Patience)", n)
	}
}

// TestReads_ShareABoundedPool: hundreds of concurrent reads share
// readConns connections, kept open between bursts, rather than each
// opening one of its own (whose opening, hundreds at once, queues on
// modernc.org/libc's one allocator mutex for seconds: a store silent to
// every caller, TestReserve_BusyWriterNotAnOutage's outage under load).
func TestReads_ShareABoundedPool(t *testing.T) {
	bound := deadline.New(deadline.Default, nil)
	s := budgeted(t, 1<<40, WithAround(bound.Around))
	const n = 200
	for range 2 { // a second burst finds the first's connections open
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Budgeted(t.Context(), "budgeted", "alpha", ""); err != nil {
					t.Errorf("Budgeted = %v, want nil", err)
				}
			}()
		}
		wg.Wait()
	}
	st := s.r.Stats()
	if st.MaxOpenConnections != readConns() || st.OpenConnections > readConns() {
		t.Errorf("read pool: %d open, at most %d, want at most readConns() = %d", st.OpenConnections, st.MaxOpenConnections, readConns())
	}
	if st.MaxIdleClosed != 0 {
		t.Errorf("read pool closed %d idle connections between bursts, want 0", st.MaxIdleClosed)
	}
}
