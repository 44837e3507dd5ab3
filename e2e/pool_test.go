package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// limitedKey answers every call with a 429, as a key over its rate limit
// does; the pool's other keys answer as the stand-in does.
type limitedKey struct {
	key     string
	limited atomic.Int64
}

func (l *limitedKey) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") == l.key {
		l.limited.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"This key is over its rate limit."}}`))
		return
	}
	brokertest.AnthropicStandIn(w, r)
}

// TestGoSDK_CompletesWhileOneKeyIsLimited: with a pool of three keys, one
// of which answers 429 throughout, the official Go SDK, told to make no
// retries of its own, completes every call of several boxes, plain and
// streamed: the broker fails over before the SDK sees a refusal.
func TestGoSDK_CompletesWhileOneKeyIsLimited(t *testing.T) {
	// The limited key is the first choice of box pool-0, so that some
	// box's calls meet it.
	b, up := limitedPool(t, "pool-0")
	for i := 0; i < 6; i++ {
		token := b.AddBox(fmt.Sprintf("pool-%d", i))
		b.Report(token, brokertest.Entry(protocol.Inference, "agent"))
		c := anthropic.NewClient(
			option.WithoutEnvironmentDefaults(),
			option.WithBaseURL(b.URL+protocol.PrefixAnthropic+"/"),
			option.WithAPIKey(token),
			option.WithHTTPClient(&http.Client{Transport: http.DefaultTransport}),
			option.WithMaxRetries(0),
		)
		for j := 0; j < 3; j++ {
			msg, err := c.Messages.New(context.Background(), hiParams())
			if err != nil {
				t.Fatalf("box pool-%d call %d: Messages.New: %v", i, j, err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from the stand-in." {
				t.Errorf("box pool-%d call %d: %s, want the stand-in's answer", i, j, msg.RawJSON())
			}
		}
		stream := c.Messages.NewStreaming(context.Background(), hiParams())
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatalf("box pool-%d: accumulate: %v", i, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("box pool-%d: streaming: %v", i, err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text != "Hello from the stand-in." {
			t.Errorf("box pool-%d: streamed %+v, want the stand-in's answer", i, acc.Content)
		}
	}
	if up.limited.Load() == 0 {
		t.Errorf("the limited key was never tried; the test shows nothing")
	}
}

// limitedPool starts a broker whose pool holds three keys, of which box's
// first choice answers 429 throughout.
func limitedPool(t *testing.T, box string) (*brokertest.Broker, *limitedKey) {
	t.Helper()
	names := []string{pool.Default, "second", "third"}
	values := map[string]string{pool.Default: credential, "second": credential + "-SECOND", "third": credential + "-THIRD"}
	es := []pool.Entry{{Name: names[0], Weight: 1}, {Name: names[1], Weight: 1}, {Name: names[2], Weight: 1}}
	up := &limitedKey{key: values[pool.Order(box, es)[0]]}
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	b.SetCredential(pool.SharedID, credential)
	for _, n := range names[1:] {
		sealed, err := b.Server.Keyring.Seal([]byte(values[n]), pool.AD(n))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: n, Weight: 1, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		b.Server.Cache.Drop(store.ChangePool, n)
	}
	return b, up
}

// TestClaudeCode_CompletesWhileOneKeyIsLimited: Claude Code, run as a box
// whose first key answers 429 throughout, completes its prompt without a
// retry of its own showing: the broker fails over to the next key.
func TestClaudeCode_CompletesWhileOneKeyIsLimited(t *testing.T) {
	b, up := limitedPool(t, "e2e")
	token := b.AddBox("e2e")
	b.Report(token, brokertest.Entry(protocol.Inference, "agent"))
	out, errOut, other, err := runClaude(t, b, token, "-p", "say hi")
	if err != nil {
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if strings.TrimSpace(out) != "Hello from the stand-in." {
		t.Errorf("claude -p printed %q, want the stand-in's answer", out)
	}
	if up.limited.Load() == 0 {
		t.Errorf("the limited key was never tried; the test shows nothing")
	}
	t.Logf("Claude Code made %d requests to the broker; the limited key refused %d", len(b.Front.Seen()), up.limited.Load())
	if len(other) != 0 {
		t.Errorf("Claude Code tried to reach hosts other than the broker: %v", other)
	}
}
