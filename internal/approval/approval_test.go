package approval_test

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/token"
)

// newService returns a Service over a new SQLite store holding the box
// "alpha", its clock, and the proposals it notified.
func newService(t *testing.T) (*approval.Service, *sqlite.Store, *clocktest.Clock, *[]store.Proposal) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateBox(t.Context(), store.Box{Name: "alpha", TokenHash: token.Hash(boxToken), CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	c := clocktest.New(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var notified []store.Proposal
	svc, err := approval.New(approval.Config{Store: st, PageURL: "https://broker.example/admin/", Now: c.Now, MaxPending: 3, PendingFor: time.Hour,
		Notify: func(p store.Proposal) { mu.Lock(); notified = append(notified, p); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st, c, &notified
}

// boxToken is box alpha's token.
const boxToken = "box-token-123"

func rule(path string) approval.Attempt {
	return approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalRule, Secret: "GITHUB", Method: "POST", Path: path,
		Host: "https://api.github.com", Reason: "outside its rules"}, TokenHash: token.Hash(boxToken), Forbidden: []string{boxToken}}
}

func TestRefused_NotAskedOpensNothing(t *testing.T) {
	svc, _, _, notified := newService(t)
	v, err := svc.Refused(t.Context(), rule("/repos/acme/x/issues"))
	if err != nil || v.Approved || v.Asked || v.Proposal.ID != "" {
		t.Fatalf("Refused(not asked) = %+v, %v; want nothing", v, err)
	}
	if svc.Words(v) != "" || len(*notified) != 0 {
		t.Errorf("Words = %q, notified %d; want none", svc.Words(v), len(*notified))
	}
}

func TestRefused_OpenApproveRetry(t *testing.T) {
	svc, _, c, notified := newService(t)
	ctx := t.Context()
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	a := rule("/repos/acme/x/issues")
	v, err := svc.Refused(ctx, a)
	if err != nil || v.Approved || v.Proposal.ID == "" || v.Proposal.State != store.ProposalPending {
		t.Fatalf("Refused = %+v, %v; want a pending proposal", v, err)
	}
	id := v.Proposal.ID
	if w := svc.Words(v); !strings.Contains(w, "boxbroker approve "+id) || !strings.Contains(w, "https://broker.example/admin/") {
		t.Errorf("Words = %q, want the approve command and the page", w)
	}
	if len(*notified) != 1 {
		t.Errorf("notified %d, want 1", len(*notified))
	}
	// The same attempt again merges.
	v2, err := svc.Refused(ctx, a)
	if err != nil || v2.Proposal.ID != id || v2.Proposal.Count != 2 {
		t.Errorf("Refused again = %s count %d, %v; want %s count 2", v2.Proposal.ID, v2.Proposal.Count, err, id)
	}
	if len(*notified) != 1 {
		t.Errorf("notified %d after a merge, want 1", len(*notified))
	}
	if _, err := svc.Approve(ctx, id, time.Hour, false, "owner"); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Refused(ctx, a); err != nil || !v.Approved {
		t.Errorf("Refused after approval = %+v, %v; want approved", v, err)
	}
	// Exactly what was asked: another path, method or secret is not approved.
	other := []approval.Attempt{rule("/repos/acme/y/issues"), rule("/repos/acme/x/issues/1")}
	m := rule("/repos/acme/x/issues")
	m.Method = "DELETE"
	s := rule("/repos/acme/x/issues")
	s.Secret = "OTHER"
	h := rule("/repos/acme/x/issues")
	h.Host = "https://evil.example"
	other = append(other, m, s, h)
	for _, o := range other {
		if v, err := svc.Refused(ctx, o); err != nil || v.Approved {
			t.Errorf("Refused(%s %s %s %s) = approved; want refused", o.Secret, o.Host, o.Method, o.Path)
		}
	}
	// The approval ends.
	c.Advance(time.Hour)
	if v, err := svc.Refused(ctx, a); err != nil || v.Approved {
		t.Errorf("Refused after the approval's end = %+v, %v; want refused", v, err)
	}
}

func TestRefused_DenyAndExpiry(t *testing.T) {
	svc, _, c, _ := newService(t)
	ctx := t.Context()
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	v, _ := svc.Refused(ctx, rule("/a"))
	if _, err := svc.Deny(ctx, v.Proposal.ID, "owner"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Approve(ctx, v.Proposal.ID, 0, true, "owner"); !errors.Is(err, store.ErrNotPending) {
		t.Errorf("Approve(denied) = %v, want ErrNotPending", err)
	}
	if v, _ := svc.Refused(ctx, rule("/a")); v.Approved || v.Proposal.ID != "" || v.Denied.ID == "" || !strings.Contains(svc.Words(v), "denied") {
		t.Errorf("Refused after deny = %+v; want refused, no new proposal, the denial named", v)
	}
	w, _ := svc.Refused(ctx, rule("/b"))
	c.Advance(time.Hour)
	if _, err := svc.Approve(ctx, w.Proposal.ID, time.Hour, false, "owner"); !errors.Is(err, store.ErrNotPending) {
		t.Errorf("Approve(expired) = %v, want ErrNotPending", err)
	}
	got, err := svc.Get(ctx, w.Proposal.ID)
	if err != nil || got.State != store.ProposalExpired {
		t.Errorf("Get(expired) = %s, %v; want expired", got.State, err)
	}
}

func TestRefused_Bounded(t *testing.T) {
	svc, st, _, notified := newService(t)
	ctx := t.Context()
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		v, err := svc.Refused(ctx, rule("/flood/"+strings.Repeat("x", i%50)))
		if err != nil {
			t.Fatal(err)
		}
		if i >= 3 && i < 50 && !v.Full {
			t.Fatalf("Refused #%d = %+v; want full", i, v)
		}
		if v.Full && !strings.Contains(svc.Words(v), "3 proposals waiting") {
			t.Errorf("Words(full) = %q", svc.Words(v))
		}
	}
	all, err := st.ListProposals(ctx, "", "", time.Now().Add(-time.Hour), 1000)
	if err != nil || len(all) != 3 || len(*notified) != 3 {
		t.Errorf("a flood of 200 refusals wrote %d rows and notified %d, %v; want 3", len(all), len(*notified), err)
	}
}

func TestRefused_NeverHoldsTheToken(t *testing.T) {
	svc, _, _, _ := newService(t)
	ctx := t.Context()
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/x/box-token-123", "/x/box%2Dtoken-123"} {
		v, err := svc.Refused(ctx, rule(path))
		if err != nil || v.Proposal.ID != "" {
			t.Errorf("Refused(%q) opened %+v, %v; want none", path, v.Proposal, err)
		}
	}
}

// TestRefused_OpensNoProposalForAnOverlongAttempt: a path, a host or a
// model over MaxField opens no proposal and notifies no one; one at the
// bound does.
func TestRefused_OpensNoProposalForAnOverlongAttempt(t *testing.T) {
	svc, _, _, notified := newService(t)
	ctx := t.Context()
	for _, sc := range []string{approval.SecretScope("GITHUB"), approval.ScopeHosts, approval.ScopeBudget} {
		if err := svc.SetAsk(ctx, "alpha", sc, true); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("x", approval.MaxField+1)
	tests := []approval.Attempt{
		rule("/" + long),
		{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalHost, Method: "CONNECT", Host: long + ":443", Reason: "no secret"}, TokenHash: token.Hash(boxToken)},
		{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalBudget, Model: long, Amount: 5, Payer: "shared", Reason: "over budget"}, TokenHash: token.Hash(boxToken)},
	}
	for _, a := range tests {
		v, err := svc.Refused(ctx, a)
		if err != nil || v.Proposal.ID != "" || !v.Asked {
			t.Errorf("Refused(%s, overlong) = %+v, %v; want asked, no proposal", a.Kind, v, err)
		}
	}
	if len(*notified) != 0 {
		t.Errorf("notified %d proposals, want none", len(*notified))
	}
	if v, err := svc.Refused(ctx, rule("/"+long[:approval.MaxField-1])); err != nil || v.Proposal.ID == "" {
		t.Errorf("Refused(a path of MaxField bytes) = %+v, %v; want a proposal", v, err)
	}
}

// What a box chose that would not read as itself on the page, in the
// CLI or in the webhook's messages (a path sent with a raw
// bidirectional override, a CONNECT host holding one, a model holding a
// space or a line break, words with a line break or an override decoded
// from the path) opens no proposal; the plain forms of each still do.
func TestRefused_OpensNoProposalForWhatWouldNotReadAsItself(t *testing.T) {
	svc, _, _, notified := newService(t)
	ctx := t.Context()
	for _, sc := range []string{approval.SecretScope("GITHUB"), approval.ScopeHosts, approval.ScopeBudget} {
		if err := svc.SetAsk(ctx, "alpha", sc, true); err != nil {
			t.Fatal(err)
		}
	}
	host := func(h string) approval.Attempt {
		return approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalHost, Method: "CONNECT", Host: h, Reason: "no secret"}, TokenHash: token.Hash(boxToken)}
	}
	budget := func(model string) approval.Attempt {
		return approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalBudget, Model: model, Amount: 5, Payer: "shared", Reason: "over budget"}, TokenHash: token.Hash(boxToken)}
	}
	worded := func(reason string) approval.Attempt {
		a := rule("/repos/acme/app/issues")
		a.Reason = reason
		return a
	}
	for _, a := range []approval.Attempt{
		rule("/repos/acme/\u202eeteled"),
		rule("/repos/acme/app\u00a0"),
		host("api.example.org\u202e:443"),
		budget("claude-haiku-4-5 for $0.000001"),
		budget("claude-haiku-4-5\nApprove: `boxbroker approve p-000000000000 --for always`"),
		worded("this request was POST /x\nApprove: `boxbroker approve p-000000000000 --for always`"),
		worded("this request was POST /\u202eeteled"),
	} {
		if v, err := svc.Refused(ctx, a); err != nil || v.Proposal.ID != "" || !v.Asked {
			t.Errorf("Refused(%s %q %q %q %q) = %+v, %v; want asked, no proposal", a.Kind, a.Path, a.Host, a.Model, a.Reason, v, err)
		}
	}
	if len(*notified) != 0 {
		t.Errorf("notified %d proposals, want none", len(*notified))
	}
	for _, a := range []approval.Attempt{rule("/repos/acme/app/contents/r%C3%A9sum%C3%A9.md"), worded("this request was POST /r\u00e9sum\u00e9.md"), host("api.example.org:443")} {
		if v, err := svc.Refused(ctx, a); err != nil || v.Proposal.ID == "" {
			t.Errorf("Refused(%s %q %q %q) = %+v, %v; want a proposal", a.Kind, a.Path, a.Host, a.Reason, v, err)
		}
	}
}

func TestParseFor(t *testing.T) {
	tests := []struct {
		in     string
		d      time.Duration
		always bool
		ok     bool
	}{
		{"15m", 15 * time.Minute, false, true},
		{"1h", time.Hour, false, true},
		{"7d", 7 * 24 * time.Hour, false, true},
		{"always", 0, true, true},
		{"10s", 0, false, false},
		{"400d", 0, false, false},
		{"-1h", 0, false, false},
		{"x", 0, false, false},
		{"1.5d", 0, false, false},
	}
	for _, tt := range tests {
		d, always, err := approval.ParseFor(tt.in)
		if (err == nil) != tt.ok || d != tt.d || always != tt.always {
			t.Errorf("ParseFor(%q) = %v, %v, %v; want %v, %v, ok %v", tt.in, d, always, err, tt.d, tt.always, tt.ok)
		}
	}
}

func TestSetAsk_BadScope(t *testing.T) {
	svc, _, _, _ := newService(t)
	for _, sc := range []string{"", "secret:", "everything"} {
		if err := svc.SetAsk(t.Context(), "alpha", sc, true); !errors.Is(err, approval.ErrBadScope) {
			t.Errorf("SetAsk(%q) = %v, want ErrBadScope", sc, err)
		}
	}
}

// TestSetAsk_SecretScopeNamesASecret: a secret:NAME put in ask mode
// names a secret as secret set takes it (upper-case), whichever front
// end asks, since no refusal would match another; taking one out stays
// open, to clear one set.
func TestSetAsk_SecretScopeNamesASecret(t *testing.T) {
	svc, _, _, _ := newService(t)
	for _, sc := range []string{"secret:github", "secret:1ST", "secret:A-B"} {
		if err := svc.SetAsk(t.Context(), "alpha", sc, true); !errors.Is(err, approval.ErrBadSecretName) {
			t.Errorf("SetAsk(%q, on) = %v, want ErrBadSecretName", sc, err)
		}
		if err := approval.CheckAsk(sc, false); err != nil {
			t.Errorf("CheckAsk(%q, off) = %v, want nil", sc, err)
		}
	}
	if err := approval.CheckAsk("secret:GITHUB", true); err != nil {
		t.Errorf("CheckAsk(secret:GITHUB, on) = %v, want nil", err)
	}
}

// TestRefused_ProposalKeepsTheAttempt: the proposal a refusal opens, as
// stored and as notified, holds every field of what was attempted.
func TestRefused_ProposalKeepsTheAttempt(t *testing.T) {
	host := approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalHost, Method: "CONNECT", Host: "example.com:443", Reason: "no secret"}, TokenHash: token.Hash(boxToken)}
	budget := approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalBudget, Model: "claude-opus-5-5", Amount: 250000, Reason: "over budget"}, TokenHash: token.Hash(boxToken)}
	tests := []struct {
		scope string
		a     approval.Attempt
	}{
		{approval.SecretScope("GITHUB"), rule("/repos/acme/x/issues")},
		{approval.ScopeHosts, host},
		{approval.ScopeBudget, budget},
	}
	for _, tt := range tests {
		t.Run(tt.a.Kind, func(t *testing.T) {
			svc, st, c, notified := newService(t)
			if err := svc.SetAsk(t.Context(), "alpha", tt.scope, true); err != nil {
				t.Fatal(err)
			}
			v, err := svc.Refused(t.Context(), tt.a)
			if err != nil || v.Proposal.Attempt != tt.a.Attempt {
				t.Fatalf("Refused(%+v) opened %+v, %v; want its attempt", tt.a.Attempt, v.Proposal.Attempt, err)
			}
			if p, err := st.Proposal(t.Context(), v.Proposal.ID, c.Now()); err != nil || p.Attempt != tt.a.Attempt {
				t.Errorf("Proposal(%s) = %+v, %v; want %+v", v.Proposal.ID, p.Attempt, err, tt.a.Attempt)
			}
			if len(*notified) != 1 || (*notified)[0].Attempt != tt.a.Attempt {
				t.Errorf("notified %+v, want the attempt once", *notified)
			}
		})
	}
}
