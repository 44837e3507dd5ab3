package hold

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"
)

// TestCache_FloorFailureAndDrop: a value is held until its expiry, and
// for Floor at least (a zero or past expiry is Floor); a failure until
// the time it is put for; a value is dropped only when match says so, at
// most once each Floor, and a failure never. The cloud client's tokens
// and sessions and the minter's tokens are held alike.
func TestCache_FloorFailureAndDrop(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	var c Cache[string, string]
	for _, tt := range []struct {
		name         string
		expiry, want time.Time
	}{
		{"no expiry", time.Time{}, now.Add(DefaultFloor)},
		{"expired", now.Add(-time.Minute), now.Add(DefaultFloor)},
		{"within the floor", now.Add(time.Second), now.Add(DefaultFloor)},
		{"past the floor", now.Add(time.Hour), now.Add(time.Hour)},
	} {
		if got := c.Until(now, tt.expiry); !got.Equal(tt.want) {
			t.Errorf("Until(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
	c.Put("k", "v1", nil, c.Until(now, time.Time{}))
	if v, err, ok := c.Get("k", now.Add(DefaultFloor-time.Nanosecond)); v != "v1" || err != nil || !ok {
		t.Errorf("Get within the floor = %q, %v, %v, want v1, nil, true", v, err, ok)
	}
	if _, _, ok := c.Get("k", now.Add(DefaultFloor)); ok {
		t.Error("Get at the floor's end holds a value, want none")
	}
	if c.Drop("k", now, func(v string) bool { return v == "v0" }) {
		t.Error("Drop of a value match refuses dropped it")
	}
	if !c.Drop("k", now, func(v string) bool { return v == "v1" }) {
		t.Error("Drop of the value held did not drop it")
	}
	if _, _, ok := c.Get("k", now); ok {
		t.Error("Get after Drop holds a value, want none")
	}
	c.Put("k", "v2", nil, c.Until(now, time.Time{}))
	if c.Drop("k", now.Add(time.Second), func(string) bool { return true }) {
		t.Error("a second Drop within the floor dropped the value")
	}
	if !c.Drop("k", now.Add(DefaultFloor), func(string) bool { return true }) {
		t.Error("a Drop a floor later did not drop the value")
	}
	refused := errors.New("refused")
	c.Put("k", "", refused, now.Add(time.Minute))
	if _, err, ok := c.Get("k", now.Add(time.Minute-time.Nanosecond)); err != refused || !ok {
		t.Errorf("Get of a failure = %v, %v, want it held", err, ok)
	}
	if c.Drop("k", now.Add(time.Hour), func(string) bool { return true }) {
		t.Error("Drop dropped a failure")
	}
}

// TestShared_CallersWaitForOneRun: a caller asking one group for a key
// while f runs joins that run rather than running its own f, and one
// whose context ends leaves with its context's error while the run goes
// on for the first caller, who gets its result, typed. The minter and the
// readiness checks share their work through it as the cache does.
func TestShared_CallersWaitForOneRun(t *testing.T) {
	var g singleflight.Group
	var runs atomic.Int64
	gate, entered := make(chan struct{}), make(chan struct{})
	got := make(chan int, 1)
	go func() {
		v, _ := Shared(context.Background(), &g, "k", func() (int, error) {
			runs.Add(1)
			close(entered)
			<-gate
			return 42, nil
		})
		got <- v
	}()
	<-entered
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Shared(gone, &g, "k", func() (int, error) { runs.Add(1); return 0, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a caller whose context ended got %v, want context.Canceled", err)
	}
	close(gate)
	if v := <-got; v != 42 {
		t.Errorf("the first caller got %d, want 42", v)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}
