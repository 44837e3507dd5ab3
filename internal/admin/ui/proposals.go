package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/url"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// waitingList is the "waiting for you" section's content.
type waitingList struct {
	Form FormContext
	Rows []operator.ProposalView
	// Fors are the lengths an approval may be given for.
	Fors []string
}

// approvalFors are the lengths the page offers, the first the default.
var approvalFors = []string{"15m", "1h", "24h", "7d", "30d", "always"}

// waiting renders the "waiting for you" list: every box's pending
// proposals, newest first, with a form to approve or deny each; "" when
// none wait (or proposals are not configured).
func (u *Page) waiting(ctx context.Context, sess *Session) (template.HTML, error) {
	if u.opts.Approvals == nil {
		return "", nil
	}
	ps, err := u.a.Operator().ListProposals(ctx, "", store.ProposalPending)
	if err != nil {
		return "", err
	}
	if len(ps) == 0 {
		return "", nil
	}
	h, err := u.fragment("waiting", waitingList{Form: FormContext{CSRF: sess.CSRF}, Rows: ps, Fors: approvalFors})
	if err != nil {
		return "", fmt.Errorf("waiting list: %w", err)
	}
	return h, nil
}

// decide approves (for the form's "for") or denies the proposal {id}
// through the operator service.
func decide(approve bool) func(f *formPost) error {
	return func(f *formPost) error {
		var p operator.ProposalView
		var err error
		if approve {
			p, err = f.op.ApproveProposal(f.ctx(), f.r.PathValue("id"), f.raw("for"))
		} else {
			p, err = f.op.DenyProposal(f.ctx(), f.r.PathValue("id"))
		}
		if err != nil {
			return err
		}
		f.u.log.Info("owner's page: proposal decided", "box", p.Box, "proposal", p.ID, "state", p.State, "admin_token", f.sess.TokenID)
		return nil
	}
}

// addApprovalsSection adds to every box's page the box's approvals in
// force, each with a form to withdraw it.
func (u *Page) addApprovalsSection() {
	u.AddBoxSection(BoxSection{Title: "Approvals in force", Render: func(ctx context.Context, box string, form FormContext) (template.HTML, error) {
		ps, err := u.a.Operator().ListProposals(ctx, box, store.ProposalApproved)
		if err != nil {
			return "", err
		}
		now := u.cfg.Now()
		var rows []operator.ProposalView
		for _, p := range ps {
			if end, err := time.Parse(time.RFC3339Nano, deref(p.Until, "")); p.Until == nil || err == nil && end.After(now) {
				rows = append(rows, p)
			}
		}
		return u.fragment("approvals", struct {
			BoxPath string
			CSRF    template.HTML
			Rows    []operator.ProposalView
		}{url.PathEscape(box), form.CSRFField(), rows})
	}})
}

// withdraw withdraws the approval {id} of the box {name} through the
// operator service: the box's next identical request is refused. An
// {id} that is not the box's is a 404, withdrawn from no box.
func withdraw(f *formPost) error {
	id := f.r.PathValue("id")
	p, err := f.op.Proposal(f.ctx(), id)
	if err == nil && p.Box != f.box {
		err = operator.Errorf(operator.NotFound, "Box %s has no approval %s.", f.box, id)
	}
	if err != nil {
		return err
	}
	_, err = f.op.DenyProposal(f.ctx(), id)
	return err
}
