package server_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/token"
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
	key := newMasterKey(t)
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.Store = pg.DSN
		c.MasterKey = key
		c.StoreDeadline = 200 * time.Millisecond
	}})
	b.Client.Timeout = 20 * time.Second
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))

	refused := func(fault string) {
		t.Helper()
		var slowest time.Duration
		for range 5 {
			fresh, _ := token.NewBox() // no box's: the broker must ask the store
			start := time.Now()
			req, _ := http.NewRequest("GET", b.URL+"/llm/anthropic/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+fresh)
			resp, err := b.Client.Do(req)
			if err != nil {
				t.Fatalf("%s: request: %v (hung)", fault, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			slowest = max(slowest, time.Since(start))
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s: request = %d (Retry-After %q), want 503 with Retry-After", fault, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		}
		t.Logf("PostgreSQL %s: slowest 503 %s (deadline 200ms)", fault, slowest.Round(time.Millisecond))
		if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 503 || !strings.Contains(string(r.Body), `"store":"unavailable"`) {
			t.Errorf("%s: readyz = %d %s, want 503 naming the store", fault, r.StatusCode, r.Body)
		}
	}
	served := func(fault string) {
		t.Helper()
		for i := 0; ; i++ { // the pool reconnects on its own
			if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode == 200 {
				break
			}
			if i == 2000 {
				t.Fatalf("after %s: readyz never 200 again", fault)
			}
		}
		if r := b.Do("GET", "/llm/anthropic/v1/models", tok, nil, nil); r.StatusCode == 503 {
			t.Errorf("after %s: the box's request = 503 %s", fault, r.Body)
		}
	}

	pg.Freeze(t)
	refused("frozen")
	pg.Thaw(t)
	served("frozen")

	pg.Stop(t)
	refused("stopped")
	pg.Start(t)
	served("stopped and started again")
}
