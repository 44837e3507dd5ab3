package payer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres"
)

// postgresSchema returns a DSN for a schema of its own on the server
// BOXBROKER_TEST_POSTGRES names, dropped at cleanup. Without one the test
// is skipped, or fails when BOXBROKER_REQUIRE_POSTGRES is set (as in CI).
func postgresSchema(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("BOXBROKER_TEST_POSTGRES")
	if dsn == "" {
		msg := "no PostgreSQL to test against: set BOXBROKER_TEST_POSTGRES (eval \"$(.ci/postgres.sh)\" starts one and sets it)"
		if os.Getenv("BOXBROKER_REQUIRE_POSTGRES") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := "payertest_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close(ctx)
		t.Fatalf("CREATE SCHEMA %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("DROP SCHEMA %s: %v", schema, err)
		}
		admin.Close(ctx)
	})
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}

// TestGrant_TwoReplicasOnPostgres_NextRequestSeesEveryChange runs two
// brokers on one PostgreSQL database and one master key. Every change is
// written through replica one's store; replica two's very next request
// sees it, with no poll of its cache in between.
func TestGrant_TwoReplicasOnPostgres_NextRequestSeesEveryChange(t *testing.T) {
	dsn := postgresSchema(t)
	ctx := context.Background()
	dir := t.TempDir()
	clk := &clock{t: time.Now().UTC()}
	replica := func() *brokertest.Broker {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("postgres.Open = %v", err)
		}
		return brokertest.New(t, brokertest.Options{
			Config:        func(c *server.Config) { c.DataDir = dir },
			ServerOptions: func(o *server.Options) { o.Store, o.Now = st, clk.Now },
		})
	}
	one, two := replica(), replica()
	token := one.AddBox("a")
	one.SetCredential(payer.SharedAnthropic, sharedKey)
	one.SetCredential(payer.VisitorAnthropic(visitor), visitorKey)
	one.Report(token, brokertest.Entry("inference", "agent"))
	st := one.Server.Store

	call := func(t *testing.T, value, want, wantKey string) {
		t.Helper()
		before := len(two.Upstream.Seen())
		resp := two.Do("POST", messages, "", []byte(body), http.Header{"X-Api-Key": {token}, protocol.HeaderGrant: {value}})
		if resp.StatusCode != 200 || resp.Header.Get(protocol.HeaderPayer) != want {
			t.Fatalf("replica two: %d chant-payer %q, want 200 %q: %s", resp.StatusCode, resp.Header.Get(protocol.HeaderPayer), want, resp.Body)
		}
		seen := two.Upstream.Seen()[before:]
		if len(seen) != 1 {
			t.Fatalf("upstream received %d requests, want 1", len(seen))
		}
		assertOnly(t, seen[0], wantKey, token, value)
	}
	issue := func(t *testing.T, ttl time.Duration) (string, store.Grant) {
		t.Helper()
		v, g, err := grant.Issue(ctx, st, "a", visitor, ttl, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return v, g
	}

	t.Run("revoked", func(t *testing.T) {
		v, g := issue(t, 0)
		call(t, v, "visitor "+visitor, visitorKey)
		if err := st.RevokeGrant(ctx, g.ID, clk.Now()); err != nil {
			t.Fatal(err)
		}
		call(t, v, "shared", sharedKey)
	})
	t.Run("expired", func(t *testing.T) {
		v, _ := issue(t, time.Minute)
		call(t, v, "visitor "+visitor, visitorKey)
		clk.Advance(time.Minute)
		call(t, v, "shared", sharedKey)
	})
	t.Run("credential removed", func(t *testing.T) {
		v, _ := issue(t, 0)
		call(t, v, "visitor "+visitor, visitorKey)
		if err := st.DeleteCredential(ctx, payer.VisitorAnthropic(visitor)); err != nil {
			t.Fatal(err)
		}
		call(t, v, "shared", sharedKey)
	})
	want := map[string]int64{grant.Accepted: 3, grant.Revoked: 1, grant.Expired: 1, grant.NoCredential: 1}
	for o, n := range want {
		if got := two.Server.Payer.GrantCounts()[o]; got != n {
			t.Errorf("replica two GrantCounts()[%q] = %d, want %d", o, got, n)
		}
	}
}
