package fountain_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/store"
)

// TestFountain_AnswerHoldingTheBoxsTokenIsRecorded: a sandbox file at
// Fountain that holds the box's own token (the box wrote its .env
// there), served back, is recorded as Fountain holding the token: one
// audit row naming the host, never the token.
func TestFountain_AnswerHoldingTheBoxsTokenIsRecorded(t *testing.T) {
	var held atomic.Value
	held.Store("")
	br := newBroker(t, brokertest.Options{FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, strings.Repeat("# settings\n", 2000)+"ANTHROPIC_API_KEY="+held.Load().(string)+"\n")
	})})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", every...))
	assign(t, br, "alpha", store.ResourceSandbox, "sb-alpha")
	if r := br.Do("GET", "/fountain/api/sandboxes/sb-alpha/files/.env", tok, nil, nil); r.StatusCode != 200 {
		t.Fatalf("a file without the token = %d %s", r.StatusCode, r.Body)
	}
	held.Store(tok)
	if r := br.Do("GET", "/fountain/api/sandboxes/sb-alpha/files/.env", tok, nil, nil); r.StatusCode != 200 {
		t.Fatalf("a file holding the token = %d %s", r.StatusCode, r.Body)
	}
	ctx := context.Background()
	if err := br.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	entries, err := br.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	for _, e := range entries {
		if strings.Contains(fmt.Sprintf("%+v", e), tok) {
			t.Errorf("audit row holds the token: %+v", e)
		}
		if e.Reason == capability.ReasonTokenSeen {
			seen++
			if e.Capability != "fountain" || !strings.Contains(e.Message, "127.0.0.1:") {
				t.Errorf("token-seen row = %+v, want Fountain's, naming its host", e)
			}
		}
	}
	if seen != 1 {
		t.Errorf("token-seen rows = %d, want 1 (the second answer only): %+v", seen, entries)
	}
}
