package spend_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// heldUpstream answers as the Anthropic stand-in, each call once release
// is called; arrived receives each call as it reaches it.
func heldUpstream() (up http.Handler, arrived <-chan struct{}, release func()) {
	in, held := make(chan struct{}, 8), make(chan struct{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		<-held
		brokertest.AnthropicStandIn(w, r)
	}), in, func() { close(held) }
}

// inFlight sends a Messages call of tok, and returns once it has
// reached the upstream, with what answers it.
func inFlight(t *testing.T, b *brokertest.Broker, tok string, arrived <-chan struct{}) <-chan brokertest.Response {
	t.Helper()
	done := make(chan brokertest.Response, 1)
	go func() { done <- post(b, tok, messagesBody("claude-haiku-4-5", 100, false)) }()
	select {
	case <-arrived:
	case resp := <-done:
		t.Fatalf("call = %d %s before it reached the upstream", resp.StatusCode, resp.Body)
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the upstream")
	}
	return done
}

// answered returns once the call answered resp has its settlement
// applied (the outbox's queue flushed: a call answers only once its
// records are kept); it fails the test unless resp is a 200.
func answered(t *testing.T, b *brokertest.Broker, resp brokertest.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("call = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	b.Server.Outbox.Flush(context.Background())
}

// untouched fails the test unless box has no tally and no usage in month.
func untouched(t *testing.T, st store.Store, box, month string) {
	t.Helper()
	ctx := context.Background()
	if ts, err := st.Tallies(ctx, box, month); err != nil || len(ts) != 0 {
		t.Errorf("tallies of the box added under the removed box's name = %+v, %v; want none", ts, err)
	}
	if us, err := st.ListUsage(ctx, box, month); err != nil || len(us) != 0 {
		t.Errorf("usage of the box added under the removed box's name = %+v, %v; want none", us, err)
	}
}

// TestBudget_CallInFlightOfARemovedBoxChargesNotTheNewBox: a box's call
// is in flight as the box is removed and another added under its name,
// with a budget: the call's settlement charges the new box nothing and
// adds it no usage.
func TestBudget_CallInFlightOfARemovedBoxChargesNotTheNewBox(t *testing.T) {
	b, done, release := reenrolledMidCall(t, brokertest.Options{})
	st := b.Server.Store
	fiveDollars(t, st)
	release()
	answered(t, b, <-done)
	untouched(t, st, "salad", spend.Month(time.Now()))
}

// TestBudget_CallOfARemovedBoxAdmittedFromMemoryReservesNothing: a box
// is removed and another added under its name, with a budget, while the
// broker's memory still admits the removed box's token: the removed
// box's call (on the shared key, which is no box's) holds nothing
// against the new box's budget, and is charged to it nothing.
func TestBudget_CallOfARemovedBoxAdmittedFromMemoryReservesNothing(t *testing.T) {
	u, b, tok := heardOnce(t, true)
	st, ctx := u.Store, context.Background()
	if _, err := b.Server.Cache.BoxByTokenHash(ctx, token.Hash(tok)); err != nil {
		t.Fatal(err)
	}
	// Removed and added anew by another process, with a budget, none of
	// which the broker's memory has heard of.
	reenrolUnheard(t, u, "the new box's token hash")
	fiveDollars(t, st)
	answered(t, b, post(b, tok, messagesBody("claude-haiku-4-5", 100, false)))
	untouched(t, st, "salad", spend.Month(time.Now()))
}

// TestBudget_RotationWithNoGraceMidCallIsCharged: a box's token is
// replaced with no grace while its call is in flight: the box is the
// same box, and the call is charged to it.
func TestBudget_RotationWithNoGraceMidCallIsCharged(t *testing.T) {
	up, arrived, release := heldUpstream()
	b, tok := newBroker(t, brokertest.Options{Anthropic: up})
	st, ctx := b.Server.Store, context.Background()
	fiveDollars(t, st)
	done := inFlight(t, b, tok, arrived)
	next, err := token.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RotateToken(ctx, "salad", token.Hash(next)); err != nil {
		t.Fatal(err)
	}
	release()
	answered(t, b, <-done)
	month := spend.Month(time.Now())
	if spent := boxSpent(settled(t, st, "salad", month)); spent <= 0 {
		t.Errorf("spent = %d after the call, want its charge", spent)
	}
	brokertest.Usage(t, st, "salad", month, 1)
}

// reenrolledMidCall starts a broker with opt (its Anthropic stand-in
// holding each call until release is called) whose box salad, with a
// monthly budget of $5, has a call in flight as the box is removed and
// another added under its name; done answers the call.
func reenrolledMidCall(t *testing.T, opt brokertest.Options) (b *brokertest.Broker, done <-chan brokertest.Response, release func()) {
	t.Helper()
	up, arrived, release := heldUpstream()
	opt.Anthropic = up
	b, tok := newBroker(t, opt)
	fiveDollars(t, b.Server.Store)
	done = inFlight(t, b, tok, arrived)
	if err := b.Server.Store.DeleteBox(context.Background(), "salad"); err != nil {
		t.Fatal(err)
	}
	b.AddBox("salad")
	return b, done, release
}

// heardOnce returns a broker over an Unheard store whose box salad (with
// a monthly budget of $5 when budgeted) has made a call, so that the
// broker's memory holds the box, its report and whether it has a budget,
// and has heard of every change so far; and the box's token.
func heardOnce(t *testing.T, budgeted bool) (*brokertest.Unheard, *brokertest.Broker, string) {
	t.Helper()
	u := brokertest.NewUnheard(t)
	b, tok := newBroker(t, brokertest.Options{Store: u})
	if budgeted {
		fiveDollars(t, u.Store)
	}
	b.Sync()
	if resp := post(b, tok, messagesBody("claude-haiku-4-5", 100, false)); resp.StatusCode != http.StatusOK {
		t.Fatalf("the box's call = %d %s", resp.StatusCode, resp.Body)
	}
	return u, b, tok
}

// reenrolUnheard removes salad and adds another box under its name, with
// the token that hashes to tokenHash, as another process does, which
// the broker's memory over u does not hear of.
func reenrolUnheard(t *testing.T, u *brokertest.Unheard, tokenHash string) {
	t.Helper()
	ctx := context.Background()
	u.Deaf.Store(true)
	if err := u.Store.DeleteBox(ctx, "salad"); err != nil {
		t.Fatal(err)
	}
	if err := u.Store.CreateBox(ctx, store.Box{Name: "salad", TokenHash: tokenHash, CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		t.Fatal(err)
	}
}

// fiveDollars gives the box salad a monthly budget of $5.
func fiveDollars(t *testing.T, st store.Store) {
	t.Helper()
	if err := st.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: 5_000_000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestBudget_NewBoxIsNotTakenForTheRemovedOnesUnbudgeted: a box with no
// budget is removed and another added under its name with a budget (a
// scripted `box remove`, `box add`, `budget set`) while the broker's
// memory, which knows the removed box had none, has not heard of it: the
// new box's call is held to its own budget, not forwarded unreserved as
// the removed box's would be.
func TestBudget_NewBoxIsNotTakenForTheRemovedOnesUnbudgeted(t *testing.T) {
	u, b, _ := heardOnce(t, false)
	st, ctx := u.Store, context.Background()
	next, err := token.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	reenrolUnheard(t, u, token.Hash(next))
	b.Report(next, brokertest.Entry("inference", "agent", "decide"))
	// A budget of one micro-dollar, which any call could pass.
	if err := st.SetBudget(ctx, store.Budget{Box: "salad", Limit: 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	resp := post(b, next, messagesBody("claude-haiku-4-5", 100, false))
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "monthly budget of $0.000001") {
		t.Errorf("the new box's call = %d %s, want 403 naming its budget", resp.StatusCode, resp.Body)
	}
	untouched(t, st, "salad", spend.Month(time.Now()))
}

// TestBudget_UnboundableCallOfARemovedBoxIsNotJudgedByTheNewBoxsBudget:
// a box with a budget is removed and another added under its name with a
// budget of its own, while the broker's memory still admits the
// removed box's token: the removed box's call that nothing bounds is
// refused as a removed box's, not by (and naming) the new box's budget.
func TestBudget_UnboundableCallOfARemovedBoxIsNotJudgedByTheNewBoxsBudget(t *testing.T) {
	u, b, tok := heardOnce(t, true)
	st, ctx := u.Store, context.Background()
	reenrolUnheard(t, u, "the new box's token hash")
	if err := st.SetBudget(ctx, store.Budget{Box: "salad", Limit: 7_000_000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	mcp := []byte(`{"model":"claude-haiku-4-5","max_tokens":5,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}],"messages":[{"role":"user","content":"hi"}]}`)
	resp := post(b, tok, mcp)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || msg != "The box was removed from this broker." {
		t.Errorf("the removed box's unboundable call = %d %s, want 403 removed", resp.StatusCode, resp.Body)
	}
	untouched(t, st, "salad", spend.Month(time.Now()))
}

// TestAlerts_LateSettlementOfARemovedBoxAlertsNotTheNewBox: a box's call
// is in flight as the box is removed and another added under its name
// with a budget its charge would cross a threshold of: the call's
// settlement has the new box's budgets looked at (by its name), which
// find nothing of it charged, so no alert is given for the new box.
func TestAlerts_LateSettlementOfARemovedBoxAlertsNotTheNewBox(t *testing.T) {
	b, done, release := reenrolledMidCall(t, brokertest.Options{Config: func(c *server.Config) { c.BudgetAlerts = []int{1} }})
	st, ctx := b.Server.Store, context.Background()
	// A hundred micro-dollars: the call's charge, were it the new box's,
	// would cross 1% of it.
	if err := st.SetBudget(ctx, store.Budget{Box: "salad", Limit: 100, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	release()
	answered(t, b, <-done)
	if err := b.Server.Alerter.Check(ctx, "salad"); err != nil {
		t.Fatal(err)
	}
	if as, err := st.ListAlerts(ctx, "salad", 10); err != nil || len(as) != 0 {
		t.Errorf("alerts of the new box = %+v, %v; want none", as, err)
	}
	untouched(t, st, "salad", spend.Month(time.Now()))
}
