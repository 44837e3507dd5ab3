package inference_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
)

// quotaHeaders are the answer headers that name the paying organisation
// and what is left of its rate limits.
var quotaHeaders = map[string]string{
	"Anthropic-Organization-Id":                        "org-0123-operator",
	"Anthropic-Ratelimit-Requests-Limit":               "4000",
	"Anthropic-Ratelimit-Requests-Remaining":           "3999",
	"Anthropic-Ratelimit-Requests-Reset":               "2026-01-01T00:00:01Z",
	"Anthropic-Ratelimit-Input-Tokens-Remaining":       "399000",
	"Anthropic-Ratelimit-Output-Tokens-Remaining":      "79000",
	"Anthropic-Ratelimit-Tokens-Remaining":             "478000",
	"Anthropic-Ratelimit-Priority-Tokens-Reset":        "2026-01-01T00:00:01Z",
	"anthropic-ratelimit-unified-5h-utilization":       "0.42",
	"Anthropic-Ratelimit-Unified-Representative-Claim": "five_hour",
}

// A box on the shared payer reads the answer's headers to learn which
// organisation pays for it and how much quota the entry has left (what
// it needs to aim a flood at one entry). Those headers are dropped for
// a shared payer, and kept for an owner's or a visitor's own key; the
// retry-after a box's SDK backs off by stays for every payer.
func TestInference_ASharedPayerLearnsNeitherOrganisationNorQuota(t *testing.T) {
	var status atomic.Int64
	status.Store(http.StatusOK)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range quotaHeaders {
			w.Header()[k] = []string{v}
		}
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte(`{"type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`))
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	b.SetCredential(payer.SharedAnthropic, apiKey)
	b.SetCredential(payer.OwnerAnthropic("o"), apiKey+"-OWNER")
	shared, owned := b.AddBox("a"), b.AddBox("o")
	ctx := context.Background()
	ob, err := b.Server.Store.Box(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	ob.PayerKind = protocol.PayerOwner
	if err := b.Server.Store.UpdateBox(ctx, ob); err != nil {
		t.Fatal(err)
	}
	if resp := b.Admin("PUT", "/api/credentials/"+payer.VisitorAnthropic("vee"), b.AdminToken, map[string]string{"value": apiKey + "-VISITOR"}); resp.StatusCode != 200 {
		t.Fatalf("PUT visitor credential = %d %s", resp.StatusCode, resp.Body)
	}
	b.Sync()
	g, _, err := grant.Issue(ctx, b.Server.Store, "a", "vee", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{shared, owned} {
		b.Report(tok, brokertest.Entry("inference", "agent"))
	}
	tests := []struct {
		name   string
		token  string
		grant  string
		status int
		payer  string
		kept   bool
	}{
		{"shared", shared, "", 200, "shared", false},
		{"shared, a 429", shared, "", 429, "shared", false},
		{"owner", owned, "", 200, "owner", true},
		{"visitor", shared, g, 200, "visitor", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status.Store(int64(tt.status))
			h := http.Header{"Anthropic-Version": {"2023-06-01"}}
			if tt.grant != "" {
				h.Set(protocol.HeaderGrant, tt.grant)
			}
			resp := b.Do("POST", "/llm/anthropic/v1/messages", tt.token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}`), h)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, resp.Body, tt.status)
			}
			if got := resp.Header.Get(protocol.HeaderPayer); len(got) < len(tt.payer) || got[:len(tt.payer)] != tt.payer {
				t.Fatalf("chant-payer = %q, want %s", got, tt.payer)
			}
			for k, v := range quotaHeaders {
				got := resp.Header.Get(k)
				if tt.kept && got != v {
					t.Errorf("%s = %q for the %s payer, want the upstream's %q", k, got, tt.payer, v)
				}
				if !tt.kept && got != "" {
					t.Errorf("%s = %q reached a box on the shared payer", k, got)
				}
			}
			if got := resp.Header.Get("Retry-After"); got != "7" {
				t.Errorf("retry-after = %q, want the upstream's 7", got)
			}
		})
	}
}
