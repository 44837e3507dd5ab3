package sqlite

import (
	"context"
	"sync"

	"github.com/intentius/boxbroker/internal/store"
)

var _ store.Notifier = (*Store)(nil)

// Listen calls notify once it listens, and then soon after each write
// through this Store that logged a change commits, until ctx ends, when
// it returns ctx's error. It hears nothing of another process's writes
// to the same file (the CLI's, another replica's): SQLite has no
// notifications across processes, so those are seen at the cache's poll.
func (s *Store) Listen(ctx context.Context, notify func()) error {
	ch := s.listeners.add()
	defer s.listeners.remove(ch)
	// What was written before the listener was added notified no one.
	notify()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
			notify()
		}
	}
}

// listeners is the set of channels Listen waits on.
type listeners struct {
	mu  sync.Mutex // guards set
	set map[chan struct{}]struct{}
}

func (l *listeners) add() chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set == nil {
		l.set = map[chan struct{}]struct{}{}
	}
	l.set[ch] = struct{}{}
	return ch
}

func (l *listeners) remove(ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.set, ch)
}

// notify wakes every listener; one already woken and not yet done stays
// woken once (its next read of the log reads everything).
func (l *listeners) notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.set {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
