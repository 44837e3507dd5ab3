package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestOperator_ProposalsAndDeadLettersThroughEveryFrontEnd runs ask,
// approve and deny and the dead letters' retry and drop through each of
// the four front ends that has the action (the owner's page decides
// proposals; it neither sets ask mode nor acts on dead letters) and
// checks its effect and the audit row it wrote, naming the front end.
func TestOperator_ProposalsAndDeadLettersThroughEveryFrontEnd(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := t.Context()
	local := map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}
	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	cookie, csrf := pageSession(t, b)
	const month = "2026-10"
	refused := fmt.Errorf("apply spooled batch: %w: refused (test)", store.ErrRejected)

	cliArgs := map[string][]string{"ask": {"ask", "{name}", "hosts"}, "approve": {"approve", "{id}", "--for", "1h"}, "deny": {"deny", "{id}"},
		"retry": {"spool", "dead", "retry", "{id}"}, "drop": {"spool", "dead", "drop", "--yes", "{id}"}}
	cliRoutes := map[string]string{"ask": "ask", "approve": "approve", "deny": "deny", "retry": "spool dead retry", "drop": "spool dead drop"}
	cli := func(env map[string]string) func(t *testing.T, action, box, id string) {
		return func(t *testing.T, action, box, id string) {
			var args []string
			for _, a := range cliArgs[action] {
				args = append(args, strings.NewReplacer("{name}", box, "{id}", id).Replace(a))
			}
			if code, out, errs := runEnv(t, env, "", args...); code != 0 {
				t.Fatalf("%q = %d %q %q", args, code, out, errs)
			}
		}
	}
	apiRoutes := map[string][3]string{
		"ask":     {"PUT", "/api/boxes/{name}/asks/{scope}", ""},
		"approve": {"POST", "/api/proposals/{id}/approve", `{"for":"1h"}`},
		"deny":    {"POST", "/api/proposals/{id}/deny", ""},
		"retry":   {"POST", "/api/spool/dead/{id}/retry", ""},
		"drop":    {"DELETE", "/api/spool/dead/{id}", ""},
	}
	apiRoute := func(action string) (string, string) { return apiRoutes[action][0], apiRoutes[action][1] }
	pageForms := map[string][2]string{"approve": {"/ui/proposals/{id}/approve", "for=1h"}, "deny": {"/ui/proposals/{id}/deny", ""}}
	// send posts body to path, as form (with the page's session) or JSON
	// (with the admin token), and wants one of the statuses.
	send := func(t *testing.T, method, path, body string, form bool, want ...int) {
		req, _ := http.NewRequest(method, b.AdminURL+path, strings.NewReader(body))
		if form {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: cookie})
		} else {
			req.Header.Set("Authorization", "Bearer "+b.AdminToken)
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, s := range want {
			if resp.StatusCode == s {
				return
			}
		}
		t.Fatalf("%s %s = %d %s, want %v", method, path, resp.StatusCode, rb, want)
	}
	type front struct {
		name    string
		decider string // the prefix of decided_by
		route   func(action string) (method, route string)
		do      func(t *testing.T, action, box, id string)
	}
	fronts := []front{
		{"cli", "cli", func(a string) (string, string) { return "CLI", cliRoutes[a] }, cli(local)},
		{"cli-admin-url", "admin", apiRoute, cli(remote)},
		{"api", "admin", apiRoute, func(t *testing.T, action, box, id string) {
			rt := apiRoutes[action]
			send(t, rt[0], strings.NewReplacer("{name}", box, "{scope}", "hosts", "{id}", id).Replace(rt[1]), rt[2], false, 200, 204)
		}},
		{"page", "page:", func(a string) (string, string) { return "POST", pageForms[a][0] }, func(t *testing.T, action, box, id string) {
			f := pageForms[action]
			form, _ := url.ParseQuery(f[1])
			form.Set("csrf", csrf)
			send(t, "POST", strings.ReplaceAll(f[0], "{id}", id), form.Encode(), true, http.StatusSeeOther)
		}},
	}
	// open opens a proposal of box, whose token is tok, for a tunnel to host.
	open := func(t *testing.T, tok, box, host string) string {
		v, err := b.Server.Approvals.Refused(ctx, approval.Attempt{Attempt: store.Attempt{Box: box, Kind: store.ProposalHost, Method: http.MethodConnect, Host: host, Reason: "no secret"}, TokenHash: token.Hash(tok)})
		if err != nil || v.Proposal.ID == "" {
			t.Fatalf("open a proposal of %s: %+v, %v", box, v, err)
		}
		return v.Proposal.ID
	}
	// dead sets a batch settling 5 on box aside as a dead letter.
	dead := func(t *testing.T, box string) string {
		d := outbox.Batch{Key: outbox.NewKey(), Settle: []store.Settlement{{Box: box, Month: month, Charge: 5}}}
		if err := b.Server.Spool.SetDead(d, refused); err != nil {
			t.Fatal(err)
		}
		return d.Key
	}
	proposalState := func(id string) store.Proposal {
		p, err := b.Server.Store.Proposal(ctx, id, time.Now())
		if err != nil {
			t.Fatalf("proposal %s: %v", id, err)
		}
		return p
	}
	for _, fe := range fronts {
		box := "ask-" + fe.name
		tok := b.AddBox(box)
		steps := []struct {
			action  string
			prepare func(t *testing.T) string // the ID the action takes
			effect  func(id string) bool
			message string
		}{
			{"ask", func(*testing.T) string { return "" }, func(string) bool {
				asks, err := b.Server.Store.ListAsks(ctx, box)
				return err == nil && len(asks) == 1 && asks[0] == approval.ScopeHosts
			}, "asks about hosts"},
			{"approve", func(t *testing.T) string { return open(t, tok, box, "one.example:443") }, func(id string) bool {
				p := proposalState(id)
				return p.State == store.ProposalApproved && strings.HasPrefix(p.DecidedBy, fe.decider) && p.Until.After(time.Now().Add(59*time.Minute))
			}, "approved proposal "},
			{"deny", func(t *testing.T) string { return open(t, tok, box, "two.example:443") }, func(id string) bool {
				p := proposalState(id)
				return p.State == store.ProposalDenied && strings.HasPrefix(p.DecidedBy, fe.decider)
			}, "denied proposal "},
			{"retry", func(t *testing.T) string { return dead(t, box) }, func(string) bool {
				ts, err := b.Server.Store.Tallies(ctx, box, month)
				return err == nil && len(ts) == 1 && ts[0].Spent == 5 && b.Server.Spool.DeadCount() == 0
			}, "applied dead letter "},
			{"drop", func(t *testing.T) string { return dead(t, box) }, func(string) bool {
				ts, err := b.Server.Store.Tallies(ctx, box, month)
				return err == nil && len(ts) == 1 && ts[0].Spent == 5 && b.Server.Spool.DeadCount() == 0
			}, "dropped dead letter "},
		}
		for _, tt := range steps {
			if _, ok := pageForms[tt.action]; fe.name == "page" && !ok {
				if tt.action == "ask" { // the page sets no ask mode: set it as the others did
					if err := b.Server.Approvals.SetAsk(ctx, box, approval.ScopeHosts, true); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			id := tt.prepare(t)
			fe.do(t, tt.action, box, id)
			if !tt.effect(id) {
				t.Errorf("%s through %s: not done", tt.action, fe.name)
			}
			entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 1})
			if err != nil || len(entries) != 1 {
				t.Fatalf("%s through %s: audit = %v, %v", tt.action, fe.name, entries, err)
			}
			method, route := fe.route(tt.action)
			if e := entries[0]; e.Capability != store.ActorAdmin || !strings.HasPrefix(e.Message, tt.message+id) || e.Method != method || e.Route != route {
				t.Errorf("%s through %s: audit row = %s %s %q by %s, want %s %s %q by %s",
					tt.action, fe.name, e.Method, e.Route, e.Message, e.Capability, method, route, tt.message+id, store.ActorAdmin)
			}
		}
	}
}
