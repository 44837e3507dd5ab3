package approval_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// failing is a proposals store whose reads of approvals in force fail.
type failing struct{ store.Proposals }

var errUnreadable = errors.New("disk on fire")

func (failing) ApprovalsInForce(context.Context, string, string, string, time.Time) ([]store.Proposal, error) {
	return nil, errUnreadable
}

func TestAsk_StoreFailureStaysRefusedAndLogs(t *testing.T) {
	_, st, c, _ := newService(t)
	svc, err := approval.New(approval.Config{Store: failing{st}, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	approved, words := svc.Ask(t.Context(), rule("/repos/acme/x/issues"), log, "egress: approvals unreadable; the request stays refused", "box", "alpha", "secret", "GITHUB")
	if approved || words != "" {
		t.Errorf("Ask(store fails) = %v, %q; want refused, no words", approved, words)
	}
	got := buf.String()
	for _, want := range []string{"level=WARN", `msg="egress: approvals unreadable; the request stays refused"`, "box=alpha", "secret=GITHUB", `err="disk on fire"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log = %q, want it to hold %q", got, want)
		}
	}
	if strings.Contains(got, "box-token-123") {
		t.Errorf("log = %q holds the box's token", got)
	}
}

func TestAsk_NilServiceAllowsNothing(t *testing.T) {
	var svc *approval.Service
	if approved, words := svc.Ask(t.Context(), rule("/x"), slog.Default(), "unused"); approved || words != "" {
		t.Errorf("nil Service's Ask = %v, %q; want refused, no words", approved, words)
	}
}

func TestAsk_TokenNeverStored(t *testing.T) {
	svc, st, c, notified := newService(t)
	ctx := t.Context()
	if err := svc.SetAsk(ctx, "alpha", approval.SecretScope("GITHUB"), true); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for _, path := range []string{"/x/box-token-123", "/x/box%2Dtoken-123", "/box-token-123/y", "/x/%2562ox-token-123", "/x/%252562ox-token-123"} {
		approved, words := svc.Ask(ctx, rule(path), log, "unused")
		if approved || words != "" {
			t.Errorf("Ask(%q) = %v, %q; want refused, no proposal named", path, approved, words)
		}
	}
	// An attempt whose reason (the refusal, which quotes the path as the
	// rules read it) holds the token opens none.
	quoted := rule("/x/y")
	quoted.Reason = "this request was POST /x/box-token-123"
	if approved, words := svc.Ask(ctx, quoted, log, "unused"); approved || words != "" {
		t.Errorf("Ask(reason holding the token) = %v, %q; want refused, no proposal named", approved, words)
	}
	// A host attempt holding the token (a CONNECT authority) opens none either.
	if err := svc.SetAsk(ctx, "alpha", approval.ScopeHosts, true); err != nil {
		t.Fatal(err)
	}
	host := approval.Attempt{Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalHost, Method: "CONNECT", Host: "box-token-123.example:443"},
		TokenHash: token.Hash(boxToken), Forbidden: []string{boxToken}}
	if approved, words := svc.Ask(ctx, host, log, "unused"); approved || words != "" {
		t.Errorf("Ask(host holding the token) = %v, %q; want refused, no proposal named", approved, words)
	}
	ps, err := st.ListProposals(ctx, "", "", c.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 0 || len(*notified) != 0 || buf.Len() != 0 {
		t.Errorf("stored %+v, notified %d, logged %q; want nothing", ps, len(*notified), buf.String())
	}
	// The same attempt without the token is stored: the refusal above was
	// the token's, not the scope's.
	if _, words := svc.Ask(ctx, rule("/x/other"), log, "unused"); !strings.Contains(words, "boxbroker approve p-") {
		t.Errorf("Ask(no token) words = %q, want a proposal named", words)
	}
}
