package pool_test

import (
	"net/http"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
)

// BenchmarkPool compares choosing a box's entry from a pool of three
// (select: the entries read through the warm cache, ranked for the box,
// the first one's credential opened) with a whole small Messages call
// through the broker on that pool, over loopback to a stand-in (call),
// in the same run: select/call is the share of a call that the pool's
// selection costs, against a stand-in that answers at once, where the
// Anthropic API takes seconds.
func BenchmarkPool(b *testing.B) {
	br, _ := setup(b, nil)
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("inference", "agent"))
	b.Run("select", func(b *testing.B) {
		p := pool.New(pool.Config{Cache: br.Server.Cache, Keyring: br.Server.Keyring, Upstream: br.Server.Config.AnthropicURL})
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Choose(ctx, "alpha", protocol.SharedPayer()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call", func(b *testing.B) {
		b.ReportAllocs()
		h := http.Header{"Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}
		for b.Loop() {
			if resp := br.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(msgBody), h); resp.StatusCode != 200 {
				b.Fatalf("call: %d %s", resp.StatusCode, resp.Body)
			}
		}
	})
}
