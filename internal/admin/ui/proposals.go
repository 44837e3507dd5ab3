package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// waitingRow is one pending proposal on the list of boxes' "waiting for
// you" list.
type waitingRow struct {
	ID, Box, What, Reason, Expires string
	Count                          int
}

// waitingList is the "waiting for you" section's content.
type waitingList struct {
	Form FormContext
	Rows []waitingRow
	// Fors are the lengths an approval may be given for.
	Fors []string
}

// approvalFors are the lengths the page offers, the first the default.
var approvalFors = []string{"15m", "1h", "24h", "7d", "30d", "always"}

// registerProposals adds the routes that approve and deny a proposal.
func (u *Page) registerProposals() {
	if u.approvals == nil {
		return
	}
	u.HandleUI("POST /ui/proposals/{id}/approve", u.decide(true))
	u.HandleUI("POST /ui/proposals/{id}/deny", u.decide(false))
}

// waiting renders the "waiting for you" list: every box's pending
// proposals, newest first, with a form to approve or deny each; "" when
// none wait (or proposals are not configured).
func (u *Page) waiting(ctx context.Context, sess *Session) (template.HTML, error) {
	if u.approvals == nil {
		return "", nil
	}
	ps, err := u.a.Operator().ListProposals(ctx, "", store.ProposalPending)
	if err != nil {
		return "", err
	}
	if len(ps) == 0 {
		return "", nil
	}
	l := waitingList{Form: FormContext{CSRF: sess.CSRF}, Fors: approvalFors}
	for _, p := range ps {
		l.Rows = append(l.Rows, waitingRow{ID: p.ID, Box: p.Box, What: p.Attempted(), Reason: p.Reason, Count: p.Count, Expires: p.ExpiresAt})
	}
	var b strings.Builder
	if err := u.tmpl.ExecuteTemplate(&b, "waiting", l); err != nil {
		return "", fmt.Errorf("waiting list: %w", err)
	}
	return template.HTML(b.String()), nil
}

// decide approves (for the form's "for") or denies the proposal {id}
// through the operator service, and goes back to the list.
func (u *Page) decide(approve bool) func(w http.ResponseWriter, r *http.Request, sess *Session) error {
	return func(w http.ResponseWriter, r *http.Request, sess *Session) error {
		op := u.op(r).DecidedBy("page:" + sess.TokenID)
		var p operator.ProposalView
		var err error
		if approve {
			p, err = op.ApproveProposal(r.Context(), r.PathValue("id"), r.PostForm.Get("for"))
		} else {
			p, err = op.DenyProposal(r.Context(), r.PathValue("id"))
		}
		if err != nil {
			return err
		}
		u.log.Info("owner's page: proposal decided", "box", p.Box, "proposal", p.ID, "state", p.State, "admin_token", sess.TokenID)
		http.Redirect(w, r, "/ui/#waiting", http.StatusSeeOther)
		return nil
	}
}
