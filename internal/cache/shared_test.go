package cache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestShared_MissesOnAKeyShareOneRead: while one store read of a key
// runs, callers that miss on the same key at the same generation wait for
// it rather than asking the store again, and one that leaves (its
// context ended) fails neither the read nor the others; a caller at a
// later generation (after a drop) does not share a read begun before it.
// Without the sharing, a burst of requests after a quiet spell sent one
// store read a request, and the store, past its deadline, answered 503.
func TestShared_MissesOnAKeyShareOneRead(t *testing.T) {
	c := &Cache{}
	var reads atomic.Int64
	gate, entered := make(chan struct{}), make(chan struct{})
	type result struct {
		v   string
		err error
	}
	first := make(chan result, 1)
	go func() {
		v, err := shared(context.Background(), c, "box", 1, "h", func(context.Context) (string, error) {
			reads.Add(1)
			close(entered)
			<-gate
			return "as read", nil
		})
		first <- result{v, err}
	}()
	<-entered

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		_, err := shared(gone, c, "box", 1, "h", func(context.Context) (string, error) {
			reads.Add(1)
			return "read again", nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a caller whose context ended got %v, want context.Canceled", err)
		}
	}
	v, err := shared(context.Background(), c, "box", 2, "h", func(context.Context) (string, error) {
		reads.Add(1)
		return "after the drop", nil
	})
	if err != nil || v != "after the drop" {
		t.Errorf("a caller at the next generation got %q, %v, want its own read", v, err)
	}

	close(gate)
	if r := <-first; r.err != nil || r.v != "as read" {
		t.Errorf("the first caller got %q, %v, want \"as read\"", r.v, r.err)
	}
	// Any read a leaving caller had started is over once this returns.
	c.flights.Do(flightKey("box", 1, "h"), func() (any, error) { return nil, nil })
	if n := reads.Load(); n != 2 {
		t.Errorf("store reads = %d, want 2 (one a generation)", n)
	}
}
