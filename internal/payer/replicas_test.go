package payer_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// TestGrant_TwoReplicasOnPostgres_NextRequestSeesEveryChange runs two
// brokers on one PostgreSQL database and one master key. Every change is
// written through replica one's store; replica two's very next request
// sees it, with no poll of its cache in between.
func TestGrant_TwoReplicasOnPostgres_NextRequestSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(time.Now().UTC())
	one, two := brokertest.Replicas(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Now = clk.Now }})
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

func TestMain(m *testing.M) { os.Exit(postgrestest.Main(m)) }
