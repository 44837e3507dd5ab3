package server_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// TestReplicas_ConnectionsTerminated: PostgreSQL ends every connection
// of replica B (pg_terminate_backend, as a restart or a failover does),
// its pool's and its change listener's, and replica A pauses one box and
// removes another just after. Once A's writes have returned and the
// staleness bound has passed, B never admits either, whichever of its
// connections are dead: it answers 403 or 503, never 200. B serves
// again with no restart (a third box, within 100 tries), and listens
// for changes again (within 10 s; it tries every second).
func TestReplicas_ConnectionsTerminated(t *testing.T) {
	dsn := postgrestest.Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Skipf("the test DSN is not a URL, so no application name can be put in it: %v", err)
	}
	// B's connections are told from every other by their application name.
	app := "boxbroker-terminated-" + brokertest.MasterKey(t)[:12]
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	key := brokertest.MasterKey(t)
	a := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.Store = dsn; c.MasterKey = key }})
	logs := &logBuffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) { c.Store = u.String(); c.MasterKey = key }})
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	a.SetCredential(payer.SharedAnthropic, "sk-ant-terminated")
	tokens := map[string]string{}
	for _, name := range []string{"paused", "removed", "kept"} {
		tokens[name] = a.AddBox(name)
		a.Report(tokens[name], brokertest.Entry("inference", "agent"))
		if r := models(b, tokens[name]); r.StatusCode != http.StatusOK {
			t.Fatalf("box %s on B = %d %s, want 200", name, r.StatusCode, r.Body)
		}
	}

	var ended int
	if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if ended == 0 {
		t.Fatal("no connection of B's to end")
	}
	pauseBox(t, a, "paused")
	if err := a.Server.Store.DeleteBox(ctx, "removed"); err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitStale(ctx, cache.DefaultMaxStale); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		for _, name := range []string{"paused", "removed"} {
			if r := models(b, tokens[name]); r.StatusCode == http.StatusOK {
				t.Fatalf("box %s on B, its connections ended, after A's write and the staleness bound = 200, want it refused", name)
			}
		}
	}
	for i := 0; ; i++ {
		r := models(b, tokens["kept"])
		if r.StatusCode == http.StatusOK {
			t.Logf("B ended %d connections; the kept box served again at try %d", ended, i+1)
			break
		}
		if r.StatusCode != http.StatusServiceUnavailable || i == 100 {
			t.Fatalf("the kept box on B, try %d after its connections ended = %d %s, want 503 until 200", i+1, r.StatusCode, r.Body)
		}
	}
	for i := 0; len(logs.lines("cache: listening for changes again")) == 0; i++ {
		if i == 100 {
			t.Fatal("B never logged listening for changes again after its listener's connection ended")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
