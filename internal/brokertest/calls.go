package brokertest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// MessagesBody is a small Messages call of a priced model, so that calls
// made with it are measured.
const MessagesBody = `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`

// Call makes a Messages call (MessagesBody) as the box with token, with a
// chant-grant header when grant is not "", and returns the answer with
// the x-api-key the upstream received ("" when it received nothing).
func (b *Broker) Call(t *testing.T, token, grant string) (Response, string) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if grant != "" {
		h.Set(protocol.HeaderGrant, grant)
	}
	before := len(b.Upstream.Seen())
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(MessagesBody), h)
	seen := b.Upstream.Seen()
	if len(seen) == before {
		return resp, ""
	}
	return resp, seen[len(seen)-1].Header.Get("X-Api-Key")
}

// PaidBy checks that a Call as token (with grant) succeeded, was paid by
// wantPayer as chant-payer says, and reached the upstream with wantKey.
func (b *Broker) PaidBy(t *testing.T, token, grant, wantPayer, wantKey string) {
	t.Helper()
	resp, key := b.Call(t, token, grant)
	if resp.StatusCode != 200 || resp.Header.Get(protocol.HeaderPayer) != wantPayer || key != wantKey {
		t.Fatalf("call = %d chant-payer %q with key %q, want 200 %q with %q: %s",
			resp.StatusCode, resp.Header.Get(protocol.HeaderPayer), key, wantPayer, wantKey, resp.Body)
	}
}

// Usage waits, up to 20 s, until box's usage in month counts calls calls
// (a call settles just after its answer's last byte), and returns it; it
// fails the test if it never does.
func Usage(t *testing.T, st store.Store, box, month string, calls int64) []store.Usage {
	t.Helper()
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
			return us
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListUsage(%s, %s) = %+v, never %d calls", box, month, us, calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
