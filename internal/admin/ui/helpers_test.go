package ui_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// The owner's page's tests share these with the admin API's (package
// admin's tests), which keep their own copy.

const (
	sharedKey  = "sk-ant-api03-SHARED-0123456789"
	visitorKey = "sk-ant-api03-VISITOR-0123456789"
	// messagesBody asks a priced model, so that calls are measured.
	messagesBody = `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
)

// call makes a Messages call as the box with token, with a chant-grant
// header when grant is not "", and returns the answer with the credential
// the upstream received.
func call(t *testing.T, b *brokertest.Broker, token, grant string) (brokertest.Response, string) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if grant != "" {
		h.Set(protocol.HeaderGrant, grant)
	}
	before := len(b.Upstream.Seen())
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(messagesBody), h)
	seen := b.Upstream.Seen()
	if len(seen) == before {
		return resp, ""
	}
	return resp, seen[len(seen)-1].Header.Get("X-Api-Key")
}

// paidBy checks that a call as token (with grant) succeeded, was paid by
// wantPayer as chant-payer says, and reached the upstream with wantKey.
func paidBy(t *testing.T, b *brokertest.Broker, token, grant, wantPayer, wantKey string) {
	t.Helper()
	resp, key := call(t, b, token, grant)
	if resp.StatusCode != 200 || resp.Header.Get(protocol.HeaderPayer) != wantPayer || key != wantKey {
		t.Fatalf("call = %d chant-payer %q with key %q, want 200 %q with %q: %s",
			resp.StatusCode, resp.Header.Get(protocol.HeaderPayer), key, wantPayer, wantKey, resp.Body)
	}
}

// measured waits until box's usage this month counts calls calls (a call
// settles just after its answer's last byte), failing the test if it never
// does.
func measured(t *testing.T, st store.Store, box string, calls int64) {
	t.Helper()
	month := spend.Month(time.Now())
	deadline := time.Now().Add(20 * time.Second)
	for {
		us, err := st.ListUsage(context.Background(), box, month)
		if err != nil {
			t.Fatalf("ListUsage(%s, %s) = %v", box, month, err)
		}
		n := int64(0)
		for _, u := range us {
			n += u.Calls
		}
		if n >= calls {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListUsage(%s, %s) = %+v, never %d calls", box, month, us, calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
