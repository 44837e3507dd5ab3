package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// TestGoSDK_RateLimitIs429TheSDKRetries: a call past the box's requests
// a minute gets a 429 rate_limit_error with Retry-After, which the Go SDK
// retries as it retries the API's own (and, still refused, reports as a
// 429 APIError), and nothing of it reaches the upstream.
func TestGoSDK_RateLimitIs429TheSDKRetries(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.SpendNow = clock }})
	b.SetCredential("anthropic", credential)
	token := b.AddBox("e2e")
	b.Report(token, brokertest.Entry(protocol.Inference, "agent"))
	ctx := context.Background()
	if err := b.Server.Store.SetRateLimit(ctx, store.RateLimit{Box: "e2e", RPM: 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatalf("SetRateLimit: %v", err)
	}
	if err := b.Server.Rates.Round(ctx); err != nil {
		t.Fatalf("Round: %v", err)
	}
	c, a := goClient(b, token)
	if _, err := c.Messages.New(ctx, hiParams()); err != nil {
		t.Fatalf("first Messages.New: %v", err)
	}
	// 59 s on, the first call leaves the minute in 1 s: the SDK waits
	// that out and retries, and is refused again (the clock stands).
	now.Add(int64(59 * time.Second))
	_, err := c.Messages.New(ctx, hiParams())
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second Messages.New = %v, want a 429 APIError", err)
	}
	if !strings.Contains(ae.RawJSON(), `"type":"rate_limit_error"`) || !strings.Contains(ae.RawJSON(), `"type":"error"`) {
		t.Errorf("429 body = %s, want the API's error shape with rate_limit_error", ae.RawJSON())
	}
	if got := ae.Response.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if n := a.n.Load(); n != 1+1+sdkDefaultRetries {
		t.Errorf("the SDK made %d requests, want %d (the 429 retried %d times)", n, 2+sdkDefaultRetries, sdkDefaultRetries)
	}
	if n := len(b.Upstream.Seen()); n != 1 {
		t.Errorf("upstream saw %d calls, want 1", n)
	}
	// A minute on, the box may call again.
	now.Add(int64(2 * time.Second))
	if _, err := c.Messages.New(ctx, hiParams()); err != nil {
		t.Fatalf("Messages.New a minute on: %v", err)
	}
}
