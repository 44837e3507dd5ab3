package spend_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/webhook"
)

// TestAlerter_ThresholdsOnceSignedAndRetried: a day's budget charged past
// 50% and 80% gives those two alerts, once each however often it is
// looked at, each posted to the webhook signed with its key, and a post
// the webhook first refuses is tried again.
func TestAlerter_ThresholdsOnceSignedAndRetried(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h", CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	if err := st.SetWindowBudget(ctx, store.Budget{Box: "alpha", Window: "day", Limit: 1_000_000, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.Settle(ctx, store.Settlement{Box: "alpha", Month: "2026-12", Charge: 850_000, At: now}); err != nil {
		t.Fatal(err)
	}
	key := []byte("webhook key")
	var mu sync.Mutex
	var got []spend.AlertEvent
	refused := false
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if !refused {
			refused = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if ts := r.Header.Get(webhook.HeaderTimestamp); r.Header.Get(webhook.HeaderSignature) != webhook.Sign(key, ts, body) {
			t.Errorf("webhook signature %q does not sign the body sent at %q", r.Header.Get(webhook.HeaderSignature), ts)
		}
		var ev spend.AlertEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		got = append(got, ev)
	}))
	defer hook.Close()
	u, _ := url.Parse(hook.URL)
	a, err := spend.NewAlerter(spend.AlertConfig{Store: st, Thresholds: []int{50, 80, 100}, Webhook: u, WebhookKey: key, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.Check(ctx, "alpha"); err != nil {
			t.Fatalf("Check = %v", err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	cancel()
	a.Run(rctx) // waits for the posts under way
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("webhook got %+v, want the 50%% and 80%% alerts once each", got)
	}
	for _, ev := range got {
		if ev.Box != "alpha" || ev.Window != "day" || ev.Period != "2026-12-06" || ev.SpentUSD != 0.85 || (ev.Threshold != 50 && ev.Threshold != 80) {
			t.Errorf("alert %+v, want alpha's day 2026-12-06 at 50 or 80%%, $0.85 spent", ev)
		}
	}
	als, err := st.ListAlerts(ctx, "alpha", 10)
	if err != nil || len(als) != 2 {
		t.Errorf("ListAlerts = %+v, %v, want 2", als, err)
	}
}

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"80,100", 2, true}, {"80%, 95%", 2, true}, {"", 0, true}, {"0", 0, false}, {"eighty", 0, false},
	}
	for _, tt := range tests {
		got, err := spend.ParseThresholds(tt.in)
		if (err == nil) != tt.ok || len(got) != tt.want {
			t.Errorf("ParseThresholds(%q) = %v, %v, want %d thresholds, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
