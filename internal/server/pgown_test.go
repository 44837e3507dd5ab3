package server_test

import (
	"os"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// TestPostgresFrozenStoppedRestarted puts the test's own PostgreSQL
// through what a server does when it fails: its processes frozen
// (SIGSTOP: connections open, nothing answers), then stopped, then
// started again. The bound held: while it is frozen or stopped, every
// request that needs the store is answered 503 with Retry-After (the
// client would give up only after 20 s, 100 times the 200 ms deadline;
// the test logs the slowest answer) and /readyz fails; once it answers
// again, /readyz is 200 and the box is served, with no restart of the
// broker.
func TestPostgresFrozenStoppedRestarted(t *testing.T) {
	if os.Getenv("BOXBROKER_FULL") == "" {
		t.Skip("starts, freezes and restarts a PostgreSQL cluster of its own (a few seconds): runs with BOXBROKER_FULL=1 (./test.sh's full run, CI)")
	}
	pg := postgrestest.OwnCluster(t)
	key := brokertest.MasterKey(t)
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.Store = pg.DSN
		c.MasterKey = key
		c.StoreDeadline = 200 * time.Millisecond
	}})
	b.Client.Timeout = 20 * time.Second
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))

	pg.Freeze(t)
	storeRefused(t, b, "PostgreSQL frozen", "200ms")
	pg.Thaw(t)
	servedAgain(t, b, tok, "PostgreSQL frozen")

	pg.Stop(t)
	storeRefused(t, b, "PostgreSQL stopped", "200ms")
	pg.Start(t)
	servedAgain(t, b, tok, "PostgreSQL stopped and started again")
}
