package server_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// A flood of /readyz, on the box-facing listener or the admin one (which
// a page the operator visits can ask, unauthenticated), is not a flood
// of store pings holding the store's connections: checks asked while a
// ping is under way share it. Here the store holds every ping, and 50
// /readyz at once start one while it is held. On the code before, each
// /readyz started a ping of its own, 50 held at once.
func TestReadyz_AFloodSharesOnePing(t *testing.T) {
	const n = 50
	var pings atomic.Int32
	var hold atomic.Bool
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	b := brokertest.New(t, brokertest.Options{
		Config: func(c *server.Config) { c.StoreDeadline = 30 * time.Second },
		ServerOptions: func(o *server.Options) {
			o.StoreAround = func(ctx context.Context, op deadline.Op, call func(context.Context) error) error {
				if op.Name == "ping" && hold.Load() {
					if pings.Add(1) == n {
						open() // every check pinged: no need to wait longer
					}
					<-gate
				}
				return call(ctx)
			}
		}})
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 200 {
		t.Fatalf("readyz = %d %s, want 200", r.StatusCode, r.Body)
	}
	hold.Store(true)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				b.Do("GET", "/readyz", "", nil, nil)
				return
			}
			b.Admin("GET", "/readyz", "", nil)
		}()
	}
	// Give the flood a second to arrive while the first ping is held
	// (the store's deadline, 30 s, gives up on none meanwhile), then
	// answer.
	for pings.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-gate:
	case <-time.After(time.Second):
	}
	got := pings.Load()
	open()
	wg.Wait()
	if got != 1 {
		t.Errorf("%d /readyz at once started %d store pings, want 1 shared", n, got)
	}
}
