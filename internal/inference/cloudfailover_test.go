package inference_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// After a pool fails over from a cloud entry to an Anthropic key, the
// Anthropic entry's answer is masked of what the cloud attempt was made
// with too: here the Anthropic upstream repeats, in its answer, the
// SigV4 signature (Bedrock) or the access token (Vertex AI) the cloud
// was sent, as one that saw them could. On the code before, only the
// cloud credential's own keys were masked after a failover.
func TestCloud_FailoverMasksWhatTheCloudAttemptWasMadeWith(t *testing.T) {
	for kind, model := range map[string]string{"bedrock": "claude-throttle", "vertex": "claude-exhausted"} {
		t.Run(kind, func(t *testing.T) {
			c := cloudtest.New(t, kind, nil)
			// made is what the cloud's last call carried: the signature
			// of its Authorization, or its bearer token.
			made := func() string {
				seen := c.Recorder.Seen()
				for i := len(seen) - 1; i >= 0; i-- {
					a := seen[i].Header.Get("Authorization")
					if _, sig, ok := strings.Cut(a, "Signature="); ok {
						return sig
					}
					if tok, ok := strings.CutPrefix(a, "Bearer "); ok {
						return tok
					}
				}
				return ""
			}
			anthropic := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := json.Marshal(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
					"content":     []map[string]any{{"type": "text", "text": "you were signed with " + made()}},
					"stop_reason": "end_turn", "usage": map[string]int{"input_tokens": 1, "output_tokens": 1}})
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(b)
			})
			sealed := checkCloud(t, kind, c.Credential)
			tr := c.Transport()
			tr.DisableCompression = true
			b := brokertest.New(t, brokertest.Options{Anthropic: anthropic, ServerOptions: func(o *server.Options) { o.Transport = tr }})
			b.SetCredential("anthropic", sealed)
			const key = "sk-ant-api03-POOL-MIXED-ENTRY"
			ps, err := b.Server.Keyring.Seal([]byte(key), pool.AD("anthro"))
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: "anthro", Weight: 1, Sealed: ps, UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			b.Server.Cache.Drop(store.ChangePool, "anthro")
			// The pool picks an entry by weight: the boxes' calls go
			// first to the cloud or to the key; those that went to the
			// cloud failed over.
			failedOver := 0
			for i := range 12 {
				tok := b.AddBox(fmt.Sprintf("box-%d", i))
				b.Report(tok, brokertest.Entry("inference", "agent"))
				before := len(c.Recorder.Seen())
				resp := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(`{"model":"`+model+`","max_tokens":5,"messages":[]}`), nil)
				if resp.StatusCode != 200 || !strings.Contains(string(resp.Body), "you were signed with") {
					t.Fatalf("status %d %s, want the Anthropic entry's answer", resp.StatusCode, resp.Body)
				}
				if len(c.Recorder.Seen()) == before {
					continue
				}
				failedOver++
				if sent := made(); len(sent) < 16 || strings.Contains(string(resp.Body), sent) {
					t.Errorf("the answer after the failover carries what the cloud attempt was made with (%d bytes): %s", len(sent), resp.Body)
				}
			}
			if failedOver == 0 {
				t.Fatal("no box's call went to the cloud first: the failover was not exercised")
			}
		})
	}
}
