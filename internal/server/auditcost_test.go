package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAudit_BytesAndCost sends a call answered whole, a streamed one and a
// refused one, and reads their audit entries: each keeps the size of the
// body the box received and the cost the spend meter priced (the same
// micro-dollars it recorded as usage), a refusal none.
func TestAudit_BytesAndCost(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.SetCredential("anthropic", "sk-ant-api03-cost-credential")
	alpha := b.AddBox("alpha")
	b.Report(alpha, brokertest.Entry("inference", "agent"))
	whole := b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(messages), nil)
	stream := b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(strings.Replace(messages, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)), nil)
	if whole.StatusCode != 200 || stream.StatusCode != 200 {
		t.Fatalf("messages = %d, %d, want 200, 200", whole.StatusCode, stream.StatusCode)
	}
	b.Report(alpha, brokertest.Entry("inference"))
	if r := b.Do("POST", "/llm/anthropic/v1/messages", alpha, []byte(messages), nil); r.StatusCode != 403 {
		t.Fatalf("messages without agent = %d, want 403", r.StatusCode)
	}
	each := recordedCallCost(t, b)
	ctx := context.Background()
	entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var calls []store.AuditEntry
	for _, e := range entries {
		if e.Route == "/llm/anthropic/v1/messages" {
			calls = append(calls, e)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("audit has %d messages entries, want 3: %+v", len(calls), entries)
	}
	refused, streamed, answered := calls[0], calls[1], calls[2]
	if answered.Bytes != int64(len(whole.Body)) || answered.Cost != each {
		t.Errorf("whole answer's entry: bytes %d, cost %d; want %d, %d", answered.Bytes, answered.Cost, len(whole.Body), each)
	}
	if streamed.Bytes != int64(len(stream.Body)) || streamed.Cost != each {
		t.Errorf("streamed answer's entry: bytes %d, cost %d; want %d, %d", streamed.Bytes, streamed.Cost, len(stream.Body), each)
	}
	if refused.Reason != "declaration" || refused.Cost != 0 || refused.Bytes == 0 {
		t.Errorf("refusal's entry = %+v, want the declaration refusal, its bytes and no cost", refused)
	}
	usage, err := b.Server.Store.ListUsage(ctx, "alpha", spend.Month(answered.At))
	if err != nil {
		t.Fatal(err)
	}
	var recorded int64
	for _, u := range usage {
		recorded += u.Cost
	}
	if recorded != answered.Cost+streamed.Cost {
		t.Errorf("usage records %d micro-dollars, the audit log %d; want the same", recorded, answered.Cost+streamed.Cost)
	}
}

// recordedCallCost has b's audit entries and settlements written, and
// returns what one of the stand-in's Messages answers costs (its usage,
// 12 input and 6 output tokens of claude-sonnet-4-5), in micro-dollars.
func recordedCallCost(t *testing.T, b *brokertest.Broker) int64 {
	t.Helper()
	ctx := context.Background()
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	b.Server.Outbox.Flush(ctx)
	price, ok := b.Server.Meter.Prices().Lookup("claude-sonnet-4-5")
	if !ok {
		t.Fatal("claude-sonnet-4-5 has no price")
	}
	each := price.Cost(spend.Tokens{Input: 12, Output: 6})
	if each <= 0 {
		t.Fatalf("a stand-in call costs %d micro-dollars, want more than 0", each)
	}
	return each
}
