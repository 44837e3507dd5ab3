package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// TestReplicas_OneGoneMidCommitHoldsNoOneUp: replica A vanishes as it
// commits a write that logged a change (its link to PostgreSQL
// black-holes every packet, as when its host is lost), leaving its
// transaction open in PostgreSQL with the change log's lock. Replica B's
// reports, which log a change too, wait on that lock and are answered
// 503 with Retry-After in the protocol's shape meanwhile; PostgreSQL ends
// A's transaction once it has waited postgres.IdleInTransaction for its
// next statement, and B's reports are taken again, rather than after
// the hours TCP's keepalive takes to end a connection whose peer is
// gone. The test gives B a minute.
func TestReplicas_OneGoneMidCommitHoldsNoOneUp(t *testing.T) {
	// A cluster of the test's own: A's transaction holds the change log's
	// lock, one for the whole database, for postgres.IdleInTransaction,
	// and on the server other tests share their writes would wait on it.
	dsn := postgrestest.OwnCluster(t).DSN
	u, err := url.Parse(dsn)
	if err != nil {
		t.Skipf("the test DSN is not a URL, so no relay can be put in its way: %v", err)
	}
	rl := newRelay(t, u.Host)
	viaRelay := *u
	viaRelay.Host = rl.addr()
	key := brokertest.MasterKey(t)
	// A's link black-holes as A sends the commit of the write armed.
	var armed atomic.Bool
	vanish := func(ctx context.Context, op deadline.Op, call func(context.Context) error) error {
		if op.Name == "commit" && op.Kind == deadline.Write && armed.CompareAndSwap(true, false) {
			rl.set(relayDrop)
		}
		return call(ctx)
	}
	a := brokertest.New(t, brokertest.Options{
		Config: func(c *server.Config) {
			c.Store = viaRelay.String()
			c.MasterKey = key
			c.StoreDeadline = 200 * time.Millisecond
		},
		ServerOptions: func(o *server.Options) { o.StoreAround = vanish },
	})
	// A's connections end before A is closed.
	t.Cleanup(func() { rl.set(relayRefuse) })
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.Store = dsn
		c.MasterKey = key
		c.StoreDeadline = 200 * time.Millisecond
	}})
	b.Client.Timeout = 20 * time.Second
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))

	armed.Store(true)
	gone := time.Now()
	if err := a.Server.Store.CreateBox(t.Context(), store.Box{Name: "beta", TokenHash: "beta", CreatedAt: gone, PayerKind: protocol.PayerShared}); err == nil {
		t.Fatal("CreateBox on A as its link black-holed = nil, want an error at its deadline")
	}

	body, _ := json.Marshal(map[string]any{"capabilities": []protocol.Capability{brokertest.Entry("inference", "decide")}})
	refused := 0
	for {
		r := b.Do(http.MethodPost, protocol.RouteDeclaration, tok, body, nil)
		if r.StatusCode == http.StatusOK {
			break
		}
		if typ, msg := brokertest.Refusal(r.Body); r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || typ != protocol.TypeAPI || msg == "" {
			t.Fatalf("B's report while A's transaction holds the change log's lock = %d (Retry-After %q) %s, want 503 with Retry-After, an api_error in the protocol's shape",
				r.StatusCode, r.Header.Get("Retry-After"), r.Body)
		}
		refused++
		if time.Since(gone) > time.Minute {
			t.Fatalf("B's reports still 503 %v after A vanished mid-commit (%d refused), want taken once PostgreSQL ends A's transaction (%v idle)",
				time.Since(gone).Round(time.Second), refused, postgres.IdleInTransaction)
		}
	}
	if refused == 0 {
		t.Error("B's first report after A vanished mid-commit = 200, want 503: A's transaction did not hold the change log's lock, and the test tested nothing")
	}
	t.Logf("B's reports taken again %v after A vanished mid-commit (%d answered 503 before)", time.Since(gone).Round(100*time.Millisecond), refused)
}
