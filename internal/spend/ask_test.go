package spend_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// askingPastBudget starts a broker whose box salad has a budget of a
// micro-dollar, spent by any call, and asks about it; it returns the
// box's token and the upstream's record.
func askingPastBudget(t *testing.T) (*brokertest.Broker, string, *brokertest.Recorder) {
	t.Helper()
	rec := &brokertest.Recorder{Handler: http.HandlerFunc(brokertest.AnthropicStandIn)}
	b, token := newBroker(t, brokertest.Options{Anthropic: rec})
	askPastBudget(t, b)
	return b, token, rec
}

// askPastBudget gives b's box salad a budget of a micro-dollar, spent by
// any call, and asks about it.
func askPastBudget(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	ctx := context.Background()
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "salad", Limit: 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	if err := b.Server.Approvals.SetAsk(ctx, "salad", approval.ScopeBudget, true); err != nil {
		t.Fatal(err)
	}
}

// race makes n calls at once with call, which returns the status of
// each, and returns how many were served; a status other than 200 or
// 403 fails the test.
func race(t *testing.T, n int, call func() int) int {
	t.Helper()
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- call()
		}()
	}
	wg.Wait()
	close(codes)
	served := 0
	for c := range codes {
		switch c {
		case http.StatusOK:
			served++
		case http.StatusForbidden:
		default:
			t.Errorf("a racing call = %d, want 200 or 403", c)
		}
	}
	return served
}

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

// unreadableApprovals is a store whose reads of approvals in force fail.
type unreadableApprovals struct{ store.Store }

func (unreadableApprovals) ApprovalsInForce(context.Context, string, string, string, time.Time) ([]store.Proposal, error) {
	return nil, errors.New("disk on fire")
}

// Unwrap lets the cache listen to the store's notifications.
func (u unreadableApprovals) Unwrap() store.Store { return u.Store }

// TestBudget_AskedButApprovalsUnreadable: with the box's owner asking
// about its budget and the store failing to read the approvals in force,
// a call past the budget stays refused, its refusal names no proposal,
// and the failure is logged at WARN with the box.
func TestBudget_AskedButApprovalsUnreadable(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	var logs brokertest.Buffer
	b, token := newBroker(t, brokertest.Options{Store: unreadableApprovals{st}, Logs: &logs})
	ctx := context.Background()
	if err := st.SetBudget(ctx, store.Budget{Box: "salad", Limit: 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	if err := b.Server.Approvals.SetAsk(ctx, "salad", approval.ScopeBudget, true); err != nil {
		t.Fatal(err)
	}
	r := post(b, token, []byte(brokertest.MessagesBody))
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("a call past the budget = %d %s, want 403", r.StatusCode, r.Body)
	}
	if _, msg := brokertest.Refusal(r.Body); !strings.Contains(msg, "budget") || strings.Contains(msg, "proposal") {
		t.Errorf("refusal = %q, want the budget and no proposal", msg)
	}
	got := logs.String()
	for _, want := range []string{`"level":"WARN"`, `"msg":"spend: approvals unreadable; the call stays refused"`, `"box":"salad"`, `"err":"disk on fire"`} {
		if !strings.Contains(got, want) {
			t.Errorf("logs hold no %s:\n%s", want, got)
		}
	}
}

// TestBudget_ApprovalOfOnePayersOverrunPaysForNoOther: a box whose
// visitor's budget on it is spent opens a proposal with a turn the
// visitor's grant pays for; a person approves that overrun, which the
// visitor's own credential pays. The box then runs past its own budget
// with the same call on the operator's credential (no grant): the
// approval is not spent on it, and the call is refused without reaching
// the upstream. The visitor's turn still gets its approval.
func TestBudget_ApprovalOfOnePayersOverrunPaysForNoOther(t *testing.T) {
	rec := &brokertest.Recorder{Handler: http.HandlerFunc(brokertest.AnthropicStandIn)}
	b, token := newBroker(t, brokertest.Options{Anthropic: rec})
	ctx := context.Background()
	value, _, err := grant.Issue(ctx, b.Server.Store, "salad", "github:ann", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.SetCredential("visitor:github:ann", key+"-VISITOR")
	for _, bg := range []store.Budget{{Box: "salad", Limit: 1_000_000}, {Box: "salad", Principal: "github:ann", Limit: 1}} {
		bg.UpdatedAt = time.Now()
		if err := b.Server.Store.SetBudget(ctx, bg); err != nil {
			t.Fatal(err)
		}
	}
	b.Sync()
	if err := b.Server.Approvals.SetAsk(ctx, "salad", approval.ScopeBudget, true); err != nil {
		t.Fatal(err)
	}
	body := []byte(brokertest.MessagesBody)
	withGrant := http.Header{"Content-Type": {"application/json"}, protocol.HeaderGrant: {value}}
	if r := b.Do("POST", "/llm/anthropic/v1/messages", token, body, withGrant); r.StatusCode != http.StatusForbidden {
		t.Fatalf("the visitor's turn past their budget = %d %s, want 403", r.StatusCode, r.Body)
	}
	approveTheOne(t, b, "the visitor's overrun")
	// The box's own budget is spent now (lowered here, as its own calls
	// would spend it).
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "salad", Limit: 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	before := len(rec.Seen())
	if r := post(b, token, body); r.StatusCode != http.StatusForbidden {
		t.Errorf("the same call on the operator's credential past the box's budget = %d, want 403: the approval was of the visitor's overrun", r.StatusCode)
	}
	if n := len(rec.Seen()) - before; n != 0 {
		t.Errorf("the upstream got %d calls on the operator's credential, want none", n)
	}
	if r := b.Do("POST", "/llm/anthropic/v1/messages", token, body, withGrant); r.StatusCode != http.StatusOK {
		t.Errorf("the visitor's turn after the approval = %d %s, want 200", r.StatusCode, r.Body)
	}
}

// TestBudget_OneApprovalRacedByManyCalls: with one budget approval in
// force, 12 identical calls past the budget sent at once: exactly one is
// let through to the upstream, the others are refused, and the approval
// is used.
func TestBudget_OneApprovalRacedByManyCalls(t *testing.T) {
	b, token, rec := askingPastBudget(t)
	ctx := context.Background()
	body := []byte(brokertest.MessagesBody)
	if r := post(b, token, body); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a call past the budget = %d, want 403", r.StatusCode)
	}
	ps, err := b.Server.Approvals.List(ctx, "salad", store.ProposalPending)
	if err != nil || len(ps) != 1 {
		t.Fatalf("pending = %+v, %v", ps, err)
	}
	if _, err := b.Server.Approvals.Approve(ctx, ps[0].ID, time.Hour, false, "test"); err != nil {
		t.Fatal(err)
	}
	before := len(rec.Seen())
	served := race(t, 12, func() int { return post(b, token, body).StatusCode })
	if served != 1 || len(rec.Seen())-before != 1 {
		t.Errorf("%d calls served and %d reached the upstream, want 1 and 1: one approval lets one call past the budget", served, len(rec.Seen())-before)
	}
	if p, err := b.Server.Store.Proposal(ctx, ps[0].ID, time.Now()); err != nil || p.State != store.ProposalUsed {
		t.Errorf("the approval after the race: %s, %v; want used", p.State, err)
	}
}

// TestBudget_ProposalHoldsNoHugeString: a box past its budget, in ask
// mode, names as its model a string of 256 KiB (a body may be far
// longer), to have the broker keep it in a proposal that the owner's
// page lists, the webhook sends and the store keeps for every pending
// proposal: the call is refused as any other, and no proposal holds it.
func TestBudget_ProposalHoldsNoHugeString(t *testing.T) {
	b, token, rec := askingPastBudget(t)
	ctx := context.Background()
	huge := "claude-" + strings.Repeat("x", 256<<10)
	body := []byte(`{"model":"` + huge + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	if r := post(b, token, body); r.StatusCode != http.StatusForbidden || len(r.Body) > 4<<10 {
		t.Errorf("a call past the budget naming a huge model = %d with %d bytes, want 403 in a few", r.StatusCode, len(r.Body))
	}
	ps, err := b.Server.Approvals.List(ctx, "salad", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if n := len(p.Model) + len(p.Reason) + len(p.Path) + len(p.Host); n > 16<<10 {
			t.Errorf("proposal %s holds %d bytes the box chose, want no huge string kept", p.ID, n)
		}
	}
	if len(rec.Seen()) != 0 {
		t.Errorf("the upstream received the call")
	}
}

// A box past its budget learns the ID of the proposal its call opened
// (the refusal names it), then names as the model of another call words
// that read, on the owner's page, in `boxbroker proposals` or in the
// webhook's Slack message, as a cheap call of another model, or as that
// first proposal and the command approving it always: a line break, a
// space, a bidirectional override, a space that is not ASCII's, a letter
// that shows as blank. No such call opens a proposal; a model as a model
// is named still does.
func TestBudget_ModelCannotDressAProposalAsAnother(t *testing.T) {
	b, token, rec := askingPastBudget(t)
	ctx := context.Background()
	call := func(model string) brokertest.Response {
		m, err := json.Marshal(model)
		if err != nil {
			t.Fatal(err)
		}
		return post(b, token, []byte(`{"model":`+string(m)+`,"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
	}
	if r := call("claude-opus-4-1"); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a call past the budget = %d, want 403", r.StatusCode)
	}
	ps, err := b.Server.Approvals.List(ctx, "salad", store.ProposalPending)
	if err != nil || len(ps) != 1 {
		t.Fatalf("proposals = %+v, %v; want the one the call opened", ps, err)
	}
	first := ps[0].ID
	for _, model := range []string{
		"claude-haiku-4-5 for up to $0.000100 past its budget and asks for it (proposal `" + first + "`).\n> a cent\nApprove: `boxbroker approve " + first + " --for always`\n\n\n\n",
		"claude-haiku-4-5 for $0.000100 past its budget (proposal " + first + ")",
		"claude-haiku-4-5\u202e1-4-supo",
		"claude-haiku-4-5" + strings.Repeat("\u00a0", 200) + "x",
		"claude\u3164haiku\u3164for\u3164$0.0001",
		"claude-haiku-4-5\tfor",
	} {
		if r := call(model); r.StatusCode != http.StatusForbidden || strings.Contains(string(r.Body), "waits for a person") {
			t.Errorf("a call past the budget naming %q = %d %s, want 403 naming no proposal", model, r.StatusCode, r.Body)
		}
	}
	ps, err = b.Server.Approvals.List(ctx, "salad", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.ID != first {
			t.Errorf("proposal %s opened for the model %q; want none but %s", p.ID, p.Model, first)
		}
	}
	if r := call("claude-haiku-4-5"); !strings.Contains(string(r.Body), "waits for a person") {
		t.Errorf("a call past the budget naming claude-haiku-4-5 = %d %s, want a proposal named", r.StatusCode, r.Body)
	}
	if len(rec.Seen()) != 0 {
		t.Errorf("the upstream received a call")
	}
}

// TestBudget_ApprovedCallPastTheBudgetIsLookedAtForAlerts: a call an
// approval lets past the box's budget is charged against it, and so
// brings the box's budget alerts (its 100%) to be looked at, as a
// reserved call's charge does; it reserved nothing, which must not leave
// the crossing unalerted.
func TestBudget_ApprovedCallPastTheBudgetIsLookedAtForAlerts(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{Config: func(c *server.Config) { c.BudgetAlerts = []int{100} }})
	askPastBudget(t, b)
	ctx := context.Background()
	body := []byte(brokertest.MessagesBody)
	if r := post(b, token, body); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a call past the budget = %d %s, want 403", r.StatusCode, r.Body)
	}
	approveTheOne(t, b, "the call's")
	if r := post(b, token, body); r.StatusCode != http.StatusOK {
		t.Fatalf("the same call after approval = %d %s, want 200", r.StatusCode, r.Body)
	}
	// The call settles just after its answer's last byte; the Alerter's
	// round (every 10 s) may have looked at the box already.
	for i := 0; ; i++ {
		als, err := b.Server.Store.ListAlerts(ctx, "salad", 10)
		if err != nil {
			t.Fatal(err)
		}
		if b.Server.Alerter.Touched("salad") || len(als) > 0 {
			break
		}
		if i == 400 {
			t.Fatal("the approved call past the budget never brought the box's alerts to be looked at")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// approveTheOne approves, for an hour, the one proposal of box salad
// pending, what names it; it fails the test when there is not one.
func approveTheOne(t *testing.T, b *brokertest.Broker, what string) {
	t.Helper()
	ctx := context.Background()
	ps, err := b.Server.Approvals.List(ctx, "salad", store.ProposalPending)
	if err != nil || len(ps) != 1 {
		t.Fatalf("pending = %+v, %v; want one: %s", ps, err, what)
	}
	if _, err := b.Server.Approvals.Approve(ctx, ps[0].ID, time.Hour, false, "test"); err != nil {
		t.Fatal(err)
	}
}
