package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// closedWait bounds the wait, once the listeners are closed at the end of
// the grace or by StopNow, for the box-facing handlers still running to
// return: their connections are closed, so they end at once, and what
// they answered is journaled before Serve returns.
const closedWait = 5 * time.Second

// stopState is how far the server's stop has gone. Its zero value is a
// server that is not stopping.
type stopState struct {
	// draining is set when Serve's context ends: readiness is refused
	// from then on, while in-flight requests finish.
	draining atomic.Bool
	nowOnce  sync.Once
	closed   sync.Once
	now      chan struct{} // closed by StopNow; made by nowOnce
	// inflight counts the box-facing handlers running.
	inflight sync.WaitGroup
}

func (st *stopState) nowChan() chan struct{} {
	st.nowOnce.Do(func() { st.now = make(chan struct{}) })
	return st.now
}

// StopNow ends the drain Serve began when its context ended, at once:
// open streams are closed rather than given the rest of ShutdownGrace, as
// a second SIGINT or SIGTERM asks. What was answered is journaled before
// Serve returns. Called before Serve's context ends, it makes the drain,
// when it comes, end at once; calling it again does nothing.
func (s *Server) StopNow() {
	s.stop.closed.Do(func() { close(s.stop.nowChan()) })
}

// Draining reports whether the server has begun to stop: from then on
// /readyz answers 503.
func (s *Server) Draining() bool { return s.stop.draining.Load() }

// tracked counts h's running handlers in s.stop.inflight.
func (s *Server) tracked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.stop.inflight.Add(1)
		defer s.stop.inflight.Done()
		h.ServeHTTP(w, r)
	})
}

// drain stops servers one after the other, the box-facing one first (the
// admin listener keeps answering /readyz, now 503, and /metrics while it
// drains): each stops taking connections and lets its requests finish
// until ShutdownGrace has passed or StopNow is called, then closes what is
// still open and waits, at most closedWait, for the box-facing handlers
// to return. It returns each server's error.
func (s *Server) drain(servers []*http.Server) []error {
	s.stop.draining.Store(true)
	s.log.Info("shutting down: /readyz answers 503; in-flight requests may finish; a second signal stops them at once",
		"grace", s.Config.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.Config.ShutdownGrace)
	defer cancel()
	now := s.stop.nowChan()
	go func() {
		select {
		case <-now:
			cancel()
		case <-sctx.Done():
		}
	}()
	var errs []error
	closed := false
	for _, hs := range servers {
		err := hs.Shutdown(sctx)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			if !closed {
				select {
				case <-now:
					s.log.Warn("stopping at once, as asked by a second signal; closing open streams")
				default:
					s.log.Warn("shutdown grace over; closing open streams")
				}
			}
			closed = true
			err = hs.Close()
		}
		errs = append(errs, err)
	}
	if closed {
		done := make(chan struct{})
		go func() { s.stop.inflight.Wait(); close(done) }()
		t := time.NewTimer(closedWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("requests still running after their connections were closed", "waited", closedWait.String())
		}
	}
	return errs
}
