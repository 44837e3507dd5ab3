package decide_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/store"
)

// TestDecide_PoolFailoverPassesOverACloudEntry: the operator's pool holds
// an Anthropic key that answers 429, a Bedrock account next in the box's
// order, and another key after it. Decide, which never sends a cloud
// account to the Anthropic API, failed over onto the Bedrock entry and
// answered 502, "the Anthropic API could not be reached", never asking
// the key after it; with the account first in the box's order, it
// refused the request (400, not available through Amazon Bedrock). It
// passes over a cloud entry to the pool's next one.
func TestDecide_PoolFailoverPassesOverACloudEntry(t *testing.T) {
	const spent, fresh = "sk-ant-api03-DECIDE-POOL-SPENT-0", "sk-ant-api03-DECIDE-POOL-FRESH-1"
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-Api-Key") != fresh {
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"no"}}`))
			return
		}
		_, _ = w.Write([]byte(message(`{"reason":"r","noul":0.5}`)))
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	b.SetCredential(pool.SharedID, spent)
	account, err := cloud.Check(cloud.KindBedrock, []byte(cloudtest.New(t, cloud.KindBedrock, nil).Credential))
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string][]byte{"bedrock": account, "fresh": []byte(fresh)} {
		sealed, err := b.Server.Keyring.Seal(value, pool.AD(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: name, Weight: 1, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		b.Server.Cache.Drop(store.ChangePool, name)
	}
	tests := []struct {
		name  string
		order []string
	}{
		{"the account after the spent key", []string{pool.Default, "bedrock", "fresh"}},
		{"the account first", []string{"bedrock", "fresh", pool.Default}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			box := ""
			for i := 0; i < 1000 && box == ""; i++ {
				name := fmt.Sprintf("box-%d", i)
				if slices.Equal(pool.Order(name, []pool.Entry{{Name: pool.Default, Weight: 1}, {Name: "bedrock", Weight: 1}, {Name: "fresh", Weight: 1}}), tt.order) {
					box = name
				}
			}
			if box == "" {
				t.Fatalf("the test is wrong: no box's order is %v", tt.order)
			}
			token := b.AddBox(box)
			b.Report(token, brokertest.Entry("inference", "decide"))
			resp := post(b, token, `{"model":"m","state":{},"questions":{"q":{"type":"noul","instructions":"Is it?","criteria":{}}}}`)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("POST decide over the pool %v = %d %s, want 200 from the fresh key", tt.order, resp.StatusCode, resp.Body)
			}
		})
	}
}
