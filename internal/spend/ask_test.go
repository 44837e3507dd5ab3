package spend_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestBudget_AskedThenApprovedOnce: with the box's owner asking about
// its budget, a call past it is refused and opens a proposal naming the
// model and the amount; approved, the same call goes through once, and
// the one after it is refused again.
func TestBudget_AskedThenApprovedOnce(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{})
	ctx := context.Background()
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "salad", Limit: 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	if err := b.Server.Approvals.SetAsk(ctx, "salad", approval.ScopeBudget, true); err != nil {
		t.Fatal(err)
	}
	body := []byte(brokertest.MessagesBody)
	r := post(b, token, body)
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("a call past the budget = %d %s, want 403", r.StatusCode, r.Body)
	}
	ps, err := b.Server.Approvals.List(ctx, "salad", store.ProposalPending)
	if err != nil || len(ps) != 1 || ps[0].Kind != store.ProposalBudget || ps[0].Model != "claude-sonnet-4-5" || ps[0].Amount <= 0 {
		t.Fatalf("pending = %+v, %v; want one budget proposal for claude-sonnet-4-5", ps, err)
	}
	if _, msg := brokertest.Refusal(r.Body); !strings.Contains(msg, "budget") || !strings.Contains(msg, "boxbroker approve "+ps[0].ID) {
		t.Errorf("refusal = %q, want the budget and the proposal", msg)
	}
	if _, err := b.Server.Approvals.Approve(ctx, ps[0].ID, time.Hour, false, "test"); err != nil {
		t.Fatal(err)
	}
	if r := post(b, token, body); r.StatusCode != http.StatusOK {
		t.Fatalf("the same call after approval = %d %s, want 200", r.StatusCode, r.Body)
	}
	if r := post(b, token, body); r.StatusCode != http.StatusForbidden {
		t.Errorf("the call after the approved one = %d, want 403: an approval of an amount is spent once", r.StatusCode)
	}
}
