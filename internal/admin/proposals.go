package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// ProposalView is a proposal as the admin API writes it.
type ProposalView struct {
	ID        string  `json:"id"`
	Box       string  `json:"box"`
	Kind      string  `json:"kind"`
	Secret    string  `json:"secret,omitempty"`
	Method    string  `json:"method,omitempty"`
	Path      string  `json:"path,omitempty"`
	Host      string  `json:"host,omitempty"`
	Model     string  `json:"model,omitempty"`
	Amount    int64   `json:"amount_micros,omitempty"`
	Reason    string  `json:"reason"`
	Count     int     `json:"count"`
	State     string  `json:"state"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
	ExpiresAt string  `json:"expires_at"`
	Until     *string `json:"until"`
	DecidedBy string  `json:"decided_by,omitempty"`
	DecidedAt *string `json:"decided_at"`
}

// ProposalViewOf is p as the admin API writes it. An approved proposal's
// Until is null for always.
func ProposalViewOf(p store.Proposal) ProposalView {
	v := ProposalView{ID: p.ID, Box: p.Box, Kind: p.Kind, Secret: p.Secret, Method: p.Method, Path: p.Path, Host: p.Host, Model: p.Model,
		Amount: p.Amount, Reason: p.Reason, Count: p.Count, State: p.State, CreatedAt: p.CreatedAt.UTC().Format(time.RFC3339),
		UpdatedAt: p.UpdatedAt.UTC().Format(time.RFC3339), ExpiresAt: p.ExpiresAt.UTC().Format(time.RFC3339), DecidedBy: p.DecidedBy,
		DecidedAt: optionalTime(p.DecidedAt)}
	if p.State == store.ProposalApproved {
		v.Until = optionalTime(p.Until)
	}
	return v
}

// ProposalList is the answer to GET /api/proposals.
type ProposalList struct {
	Proposals []ProposalView `json:"proposals"`
}

// Decision is the body of POST /api/proposals/{id}/approve: For is how
// long the approval lasts ("15m", "1h", "7d", "always"; default "1h").
type Decision struct {
	For string `json:"for"`
}

// AskList is the answer to GET /api/boxes/{name}/asks: the scopes the
// box has in ask mode ("hosts", "budget", "secret:NAME").
type AskList struct {
	Asks []string `json:"asks"`
}

// AuditFunc records an admin's action on a box (Server.Audit).
type AuditFunc func(ctx context.Context, box, method, route string, status int, message string) error

// ProposalRoutes are the admin API's routes for proposals, which the
// server adds with Handle:
//
//	GET    /api/proposals?box=B&state=S       list them, newest first
//	GET    /api/proposals/{id}                one
//	POST   /api/proposals/{id}/approve        approve it; body {"for":"1h"}
//	POST   /api/proposals/{id}/deny           deny it
//	GET    /api/boxes/{name}/asks             the box's ask-mode scopes
//	PUT    /api/boxes/{name}/asks/{scope}     put a scope in ask mode
//	DELETE /api/boxes/{name}/asks/{scope}     take it out
//
// Each decision and each change of ask mode is audited.
func ProposalRoutes(a *approval.Service, audit AuditFunc) []Route {
	return []Route{
		{Pattern: "GET /api/proposals", Handle: func(w http.ResponseWriter, r *http.Request) error {
			list, err := a.List(r.Context(), r.URL.Query().Get("box"), r.URL.Query().Get("state"))
			if err != nil {
				return proposalError(err)
			}
			out := ProposalList{Proposals: []ProposalView{}}
			for _, p := range list {
				out.Proposals = append(out.Proposals, ProposalViewOf(p))
			}
			return writeJSON(w, http.StatusOK, out)
		}},
		{Pattern: "GET /api/proposals/{id}", Handle: func(w http.ResponseWriter, r *http.Request) error {
			p, err := a.Get(r.Context(), r.PathValue("id"))
			if err != nil {
				return proposalError(err)
			}
			return writeJSON(w, http.StatusOK, ProposalViewOf(p))
		}},
		{Pattern: "POST /api/proposals/{id}/approve", Handle: func(w http.ResponseWriter, r *http.Request) error {
			d := Decision{}
			if r.ContentLength != 0 {
				if err := readJSON(w, r, &d); err != nil {
					return err
				}
			}
			p, err := Approve(r.Context(), a, r.PathValue("id"), d.For, "admin")
			if err != nil {
				return proposalError(err)
			}
			if err := audit(r.Context(), p.Box, http.MethodPost, "/api/proposals/{id}/approve", http.StatusOK, ApprovedMessage(p)); err != nil {
				return err
			}
			return writeJSON(w, http.StatusOK, ProposalViewOf(p))
		}},
		{Pattern: "POST /api/proposals/{id}/deny", Handle: func(w http.ResponseWriter, r *http.Request) error {
			p, err := a.Deny(r.Context(), r.PathValue("id"), "admin")
			if err != nil {
				return proposalError(err)
			}
			if err := audit(r.Context(), p.Box, http.MethodPost, "/api/proposals/{id}/deny", http.StatusOK, "denied proposal "+p.ID+": "+Attempted(p)); err != nil {
				return err
			}
			return writeJSON(w, http.StatusOK, ProposalViewOf(p))
		}},
		{Pattern: "GET /api/boxes/{name}/asks", Handle: func(w http.ResponseWriter, r *http.Request) error {
			asks, err := a.Asks(r.Context(), r.PathValue("name"))
			if err != nil {
				return proposalError(err)
			}
			return writeJSON(w, http.StatusOK, AskList{Asks: append([]string{}, asks...)})
		}},
		{Pattern: "PUT /api/boxes/{name}/asks/{scope}", Handle: askHandler(a, audit, true)},
		{Pattern: "DELETE /api/boxes/{name}/asks/{scope}", Handle: askHandler(a, audit, false)},
	}
}

// askHandler turns a box's ask mode for a scope on or off.
func askHandler(a *approval.Service, audit AuditFunc, on bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		box, scope := r.PathValue("name"), r.PathValue("scope")
		if err := a.SetAsk(r.Context(), box, scope, on); err != nil {
			return proposalError(err)
		}
		msg := "asks about " + scope
		if !on {
			msg = "stops asking about " + scope
		}
		if err := audit(r.Context(), box, r.Method, "/api/boxes/{name}/asks/{scope}", http.StatusOK, msg); err != nil {
			return err
		}
		asks, err := a.Asks(r.Context(), box)
		if err != nil {
			return proposalError(err)
		}
		return writeJSON(w, http.StatusOK, AskList{Asks: append([]string{}, asks...)})
	}
}

// Approve approves the proposal id for the length forWords
// (approval.ParseFor; "" is one hour), by the person named by.
func Approve(ctx context.Context, a *approval.Service, id, forWords, by string) (store.Proposal, error) {
	if forWords == "" {
		forWords = "1h"
	}
	d, always, err := approval.ParseFor(forWords)
	if err != nil {
		return store.Proposal{}, err
	}
	return a.Approve(ctx, id, d, always, by)
}

// Attempted says what a proposal's box tried, for a person.
func Attempted(p store.Proposal) string {
	switch p.Kind {
	case store.ProposalRule:
		return fmt.Sprintf("%s %s with the secret %s (%s)", p.Method, p.Path, p.Secret, p.Host)
	case store.ProposalHost:
		return "a tunnel to " + p.Host + " (passthrough, no secret)"
	default:
		return fmt.Sprintf("a call of %s for $%.6f past its budget", p.Model, float64(p.Amount)/1e6)
	}
}

// ApprovedMessage is the audit log's message for approving p.
func ApprovedMessage(p store.Proposal) string {
	until := "always"
	if !p.Until.IsZero() {
		until = "until " + p.Until.UTC().Format(time.RFC3339)
	}
	return "approved proposal " + p.ID + " " + until + ": " + Attempted(p)
}

// proposalError maps an approval's error to a refusal.
func proposalError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return operator.Errorf(operator.NotFound, "No proposal (or box) has that name: `boxbroker proposals` lists them.")
	case errors.Is(err, store.ErrNotPending):
		return operator.Errorf(operator.Conflict, "That proposal is no longer waiting: it was approved, denied, or expired unanswered.")
	case errors.Is(err, approval.ErrBadFor):
		return operator.Errorf(operator.Invalid, "An approval lasts from 1m to 366d (15m, 1h, 7d ...), or always.")
	case errors.Is(err, approval.ErrBadScope):
		return operator.Errorf(operator.Invalid, "A scope is hosts, budget, or secret:NAME.")
	case errors.Is(err, approval.ErrBadState):
		return operator.Errorf(operator.Invalid, "A state is pending, approved, denied or expired.")
	case errors.Is(err, store.ErrUnavailable):
		return operator.StoreUnavailable(err)
	}
	return err
}
