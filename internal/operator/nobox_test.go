package operator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/operator"
)

// TestService_NoBoxPointsToBoxList: every action on a box that does not
// exist is refused with the one message, NoBox, which points to `box
// list`.
func TestService_NoBoxPointsToBoxList(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	paused := true
	const box = "shop"
	actions := []struct {
		name string
		do   func() error
	}{
		{"Box", func() error { _, err := svc.Box(ctx, box); return err }},
		{"RotateBoxWith", func() error { _, err := svc.RotateBoxWith(ctx, box, operator.TokenRotation{}); return err }},
		{"UpdateBox", func() error { _, err := svc.UpdateBox(ctx, box, operator.BoxSettings{Paused: &paused}); return err }},
		{"RemoveBox", func() error { return svc.RemoveBox(ctx, box) }},
		{"Budgets", func() error { _, err := svc.Budgets(ctx, box, ""); return err }},
		{"SetBudget", func() error { _, err := svc.SetBudget(ctx, box, operator.BudgetSetting{USD: "5"}); return err }},
		{"IssueGrant", func() error {
			_, err := svc.IssueGrant(ctx, box, operator.NewGrant{Principal: "github:ann"})
			return err
		}},
		{"SetPayer", func() error { _, err := svc.SetPayer(ctx, box, operator.PayerSetting{Kind: "shared"}); return err }},
		{"SetCredential owner", func() error { _, err := svc.SetCredential(ctx, "owner:"+box, "", []byte("sk-ant-api03-x")); return err }},
		{"SetAsk", func() error { _, err := svc.SetAsk(ctx, box, "hosts", true); return err }},
		{"RateLimits", func() error { _, err := svc.RateLimits(ctx, box); return err }},
		{"ListResources", func() error { _, err := svc.ListResources(ctx, box); return err }},
		{"ListSecrets", func() error { _, err := svc.ListSecrets(ctx, box); return err }},
		{"Spend", func() error { _, err := svc.Spend(ctx, box, ""); return err }},
		{"WindowBudgets", func() error { _, err := svc.WindowBudgets(ctx, box); return err }},
	}
	want := operator.NoBox(box)
	if !strings.Contains(want, "There is no box named shop") || !strings.Contains(want, "`boxbroker box list`") {
		t.Errorf("NoBox(shop) = %q, want it to point to `boxbroker box list`", want)
	}
	for _, a := range actions {
		t.Run(a.name, func(t *testing.T) {
			var oe *operator.Error
			if err := a.do(); !errors.As(err, &oe) || oe.Code != operator.NotFound || oe.Message != want {
				t.Errorf("%s(shop) = %v, want NotFound saying %q", a.name, err, want)
			}
		})
	}
}

// TestService_NoProposalSaysID: a proposal ID that names none is refused
// as an ID, not a name.
func TestService_NoProposalSaysID(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	for _, a := range []struct {
		name string
		do   func() error
	}{
		{"Proposal", func() error { _, err := svc.Proposal(ctx, "123"); return err }},
		{"ApproveProposal", func() error { _, err := svc.ApproveProposal(ctx, "123", "1h"); return err }},
		{"DenyProposal", func() error { _, err := svc.DenyProposal(ctx, "123"); return err }},
	} {
		var oe *operator.Error
		if err := a.do(); !errors.As(err, &oe) || oe.Code != operator.NotFound || !strings.Contains(oe.Message, "No proposal has that ID") {
			t.Errorf("%s(123) = %v, want NotFound saying no proposal has that ID", a.name, err)
		}
	}
}

// TestService_ValueOfOnlySpacesIsRefused: a credential, a visitor's key
// or a secret whose value is only spaces (a header sends it as empty)
// is refused as such, whichever front end gives it, and nothing is kept.
func TestService_ValueOfOnlySpacesIsRefused(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	if _, err := svc.AddBox(ctx, operator.NewBox{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	actions := []struct {
		name string
		do   func() error
	}{
		{"SetCredential", func() error { _, err := svc.SetCredential(ctx, "anthropic", "", []byte("   ")); return err }},
		{"SetVisitor", func() error { _, err := svc.SetVisitor(ctx, "github:ann", "", []byte(" ")); return err }},
		{"SetSecret", func() error {
			_, err := svc.SetSecret(ctx, "shop", "GITHUB", operator.SecretValue{Host: "https://api.github.com", Value: "  "})
			return err
		}},
	}
	for _, a := range actions {
		t.Run(a.name, func(t *testing.T) {
			var oe *operator.Error
			if err := a.do(); !errors.As(err, &oe) || oe.Code != operator.Invalid || !strings.Contains(oe.Message, "value is only spaces") {
				t.Errorf("%s with a value of spaces = %v, want Invalid saying the value is only spaces", a.name, err)
			}
		})
	}
	if secs, err := svc.ListSecrets(ctx, "shop"); err != nil || len(secs) != 0 {
		t.Errorf("secrets kept = %+v, %v; want none", secs, err)
	}
}

// TestSecretHost_MessageReadsAsOneSentence: a refused secret host is said
// in one sentence, with no "the host" repeated after "The secret's host".
func TestSecretHost_MessageReadsAsOneSentence(t *testing.T) {
	for _, h := range []string{"api.github.com", "ftp://api.github.com", "https://user:pw@api.github.com", "https://api.github.com?x=1", "not a url\x7f"} {
		_, err := operator.SecretHost(h)
		var oe *operator.Error
		if !errors.As(err, &oe) || !strings.HasPrefix(oe.Message, "The secret's host ") || strings.Contains(oe.Message, "host the host") || strings.Contains(oe.Message, "pw") {
			t.Errorf("SecretHost(%q) = %v, want one sentence beginning \"The secret's host\", naming no password", h, err)
		}
	}
}
