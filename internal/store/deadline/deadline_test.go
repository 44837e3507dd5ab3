package deadline_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// queueStore is a store whose reservations are made one at a time, each
// taking each: a healthy store with one writer, busy. Reserve of the box
// "stuck" never answers, nor does any call while frozen is set.
type queueStore struct {
	store.Store // nil: only Reserve is called
	each        time.Duration
	mu          sync.Mutex // one reservation at a time
	frozen      bool
}

func (q *queueStore) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	if q.frozen || r.Box == "stuck" {
		select {} // a driver blocked where it does not look at its context
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	time.Sleep(q.each)
	return 1, nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestDeadline_BusyStoreAnswers makes more reservations at once than a
// store with one writer makes within one deadline: each waits its turn
// behind the others while the store keeps answering, and none is taken
// for an outage.
func TestDeadline_BusyStoreAnswers(t *testing.T) {
	const d, calls = 100 * time.Millisecond, 20
	q := &queueStore{each: 20 * time.Millisecond} // the last answers after 400 ms
	s := deadline.Wrap(q, d, quiet())
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Reserve(context.Background(), store.Reservation{Box: "busy"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Reserve(%d of %d) on a store answering one every %v = %v, want nil", i, calls, q.each, err)
		}
	}
	if !s.Down().IsZero() {
		t.Errorf("Down() = %v after a busy store answered, want zero", s.Down())
	}
}

// TestDeadline_FrozenStoreRefusedAtDeadline is the outage's promise: a
// store that answers nothing makes a call fail with ErrDeadline one
// deadline after it began, not the longer wait a busy store is given.
func TestDeadline_FrozenStoreRefusedAtDeadline(t *testing.T) {
	const d = 100 * time.Millisecond
	q := &queueStore{each: time.Millisecond}
	s := deadline.Wrap(q, d, quiet())
	if _, err := s.Reserve(context.Background(), store.Reservation{Box: "busy"}); err != nil {
		t.Fatalf("Reserve before the freeze = %v, want nil", err)
	}
	q.frozen = true
	began := time.Now()
	_, err := s.Reserve(context.Background(), store.Reservation{Box: "busy"})
	took := time.Since(began)
	if !errors.Is(err, deadline.ErrDeadline) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Reserve on a frozen store = %v, want ErrDeadline and ErrUnavailable", err)
	}
	if took < d || took > 3*d {
		t.Errorf("Reserve on a frozen store returned after %v, want about %v", took, d)
	}
}

// TestDeadline_StuckCallBoundedWhileOthersAnswer: a call the store never
// answers, while it answers every other, still ends, after Busy
// deadlines.
func TestDeadline_StuckCallBoundedWhileOthersAnswer(t *testing.T) {
	const d = 25 * time.Millisecond
	q := &queueStore{each: time.Millisecond}
	s := deadline.Wrap(q, d, quiet())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // others keep being answered
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(d / 10):
				_, _ = s.Reserve(context.Background(), store.Reservation{Box: "busy"})
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	began := time.Now()
	_, err := s.Reserve(context.Background(), store.Reservation{Box: "stuck"})
	took := time.Since(began)
	if !errors.Is(err, deadline.ErrDeadline) {
		t.Errorf("Reserve never answered = %v, want ErrDeadline", err)
	}
	if took < deadline.Busy*d || took > deadline.Busy*d+10*d {
		t.Errorf("Reserve never answered returned after %v, want about %v", took, deadline.Busy*d)
	}
}

// slowStore answers Reserve after took, calling progress (when set)
// every tick meanwhile, as a group commit's writes are made one by one
// before it commits.
type slowStore struct {
	store.Store
	took, tick time.Duration
	progress   func()
}

func (s *slowStore) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	end := time.Now().Add(s.took)
	for time.Now().Before(end) {
		time.Sleep(s.tick)
		if s.progress != nil {
			s.progress()
		}
	}
	return 1, nil
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
			st := &slowStore{took: 3 * d, tick: d / 5}
			s := deadline.Wrap(st, d, quiet())
			if tt.progress {
				st.progress = s.Progress
			}
			_, err := s.Reserve(context.Background(), store.Reservation{Box: "slow"})
			if !errors.Is(err, tt.want) {
				t.Errorf("Reserve taking %v with progress %v = %v, want %v", st.took, tt.progress, err, tt.want)
			}
		})
	}
}
