package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// TestCLI_AskProposalsApprove: on the store and through the admin API,
// `ask BOX secret:NAME` puts the secret's rules in ask mode, a refused
// egress request's proposal is listed by `proposals`, `approve ID --for
// 1h` serves the box's retry, a second decision is refused saying why,
// and `deny` denies another.
func TestCLI_AskProposalsApprove(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(host.Close)
	tok := b.AddBox("shop")
	b.SetSecret("shop", "ECHO", host.URL, "sk_cli_proposals_0123456789")
	b.SetSecretRules("shop", "ECHO", []string{"GET /ok/**"}, "")
	b.Report(tok, brokertest.Entry(protocol.Egress, "ECHO"))
	for _, tt := range storeAndAdminAPI(t, b) {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, tt.env, "", "ask", "shop", "secret:ECHO")
			if code != 0 || !strings.Contains(out, "opens a proposal") {
				t.Fatalf("ask = %d %q %q", code, out, errs)
			}
			path := "/egress/ECHO/write/" + tt.name[:1]
			if r := b.Do("POST", path, tok, nil, nil); r.StatusCode != http.StatusForbidden {
				t.Fatalf("POST outside the rules = %d, want 403", r.StatusCode)
			}
			list, err := b.Server.Store.ListProposals(t.Context(), "shop", store.ProposalPending, time.Now(), 10)
			if err != nil || len(list) != 1 {
				t.Fatalf("pending = %+v, %v; want one", list, err)
			}
			id := list[0].ID
			code, out, errs = runEnv(t, tt.env, "", "proposals")
			if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "POST /write/") || !strings.Contains(out, "pending") {
				t.Errorf("proposals = %d %q %q, want %s pending", code, out, errs, id)
			}
			code, out, errs = runEnv(t, tt.env, "", "approve", id, "--for", "1h")
			if code != 0 || !strings.Contains(out, "approved "+id) || !strings.Contains(out, "(until ") {
				t.Fatalf("approve = %d %q %q, want it approved, saying until when", code, out, errs)
			}
			if r := b.Do("POST", path, tok, nil, nil); r.StatusCode != http.StatusOK {
				t.Errorf("the retry after approve = %d %s, want 200", r.StatusCode, r.Body)
			}
			if code, _, errs := runEnv(t, tt.env, "", "deny", "123"); code == 0 || !strings.Contains(errs, "No proposal has that ID") {
				t.Errorf("deny 123 = %d %q, want refused as no proposal with that ID", code, errs)
			}
			if code, _, errs := runEnv(t, tt.env, "", "approve", id, "--for", "1h"); code == 0 || !strings.Contains(errs, "no longer waiting") {
				t.Errorf("approve again = %d %q, want refused as no longer waiting", code, errs)
			}
			if code, out, errs := runEnv(t, tt.env, "", "deny", id); code != 0 || !strings.Contains(out, "denied "+id) {
				t.Errorf("deny after approve (a withdrawal) = %d %q %q", code, out, errs)
			}
			if r := b.Do("POST", path, tok, nil, nil); r.StatusCode != http.StatusForbidden {
				t.Errorf("the retry after the withdrawal = %d %s, want 403", r.StatusCode, r.Body)
			}
			if code, _, errs := runEnv(t, tt.env, "", "deny", id); code == 0 || !strings.Contains(errs, "neither waiting nor an approval in force") {
				t.Errorf("deny again = %d %q, want refused", code, errs)
			}
			if code, _, errs := runEnv(t, tt.env, "", "approve", id, "--for", "10s"); code == 0 || !strings.Contains(errs, "--for") {
				t.Errorf("approve --for 10s = %d %q, want refused", code, errs)
			}
			b.Do("POST", path+"/other", tok, nil, nil)
			list, _ = b.Server.Store.ListProposals(t.Context(), "shop", store.ProposalPending, time.Now(), 10)
			if len(list) != 1 {
				t.Fatalf("pending = %+v, want one", list)
			}
			if code, out, errs := runEnv(t, tt.env, "", "deny", list[0].ID); code != 0 || !strings.Contains(out, "denied") {
				t.Errorf("deny = %d %q %q", code, out, errs)
			}
		})
	}
}

// TestProposals_StateNamesEveryState: a state proposals does not know is
// refused naming every one it does, used and all among them, as is the
// admin API's; used lists.
func TestProposals_StateNamesEveryState(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	dir := b.Server.Config.DataDir
	if _, errs, code := run(t, dir, "", "proposals", "--state", "bogus"); code != 2 || !strings.Contains(errs, "pending, approved, denied, expired, used, or all") {
		t.Errorf("proposals --state bogus = %d %q, want exit 2 naming every state", code, errs)
	}
	if out, errs, code := run(t, dir, "", "proposals", "--state", "used"); code != 0 || !strings.Contains(out, "no used proposals") {
		t.Errorf("proposals --state used = %d %q %q, want none listed", code, out, errs)
	}
	r := b.Admin("GET", "/api/proposals?state=bogus", b.AdminToken, nil)
	if _, msg := brokertest.Refusal(r.Body); r.StatusCode != http.StatusBadRequest || !strings.Contains(msg, "expired or used") {
		t.Errorf("GET /api/proposals?state=bogus = %d %q, want 400 naming used among the states", r.StatusCode, msg)
	}
}

// TestAsk_SecretNameMustBeOne: `ask BOX secret:github` is refused (exit
// 2) naming the secret name's pattern, since no refusal would ever match
// it; turning such a scope off is taken, to clear one set, and says that
// the box asks about nothing more and that approvals given still hold.
func TestAsk_SecretNameMustBeOne(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := run(t, dir, "", "box", "add", "shop"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	if _, errs, code := run(t, dir, "", "ask", "shop", "secret:github"); code != 2 || !strings.Contains(errs, "^[A-Z][A-Z0-9_]{0,39}$") {
		t.Errorf("ask shop secret:github = %d %q, want exit 2 naming the secret name's pattern", code, errs)
	}
	if out, errs, code := run(t, dir, "", "ask", "shop", "secret:github", "--off"); code != 0 || !strings.Contains(out, "asks about nothing; approvals already given hold") {
		t.Errorf("ask shop secret:github --off = %d %q %q, want it taken, saying the box asks about nothing and approvals hold", code, out, errs)
	}
	if out, errs, code := run(t, dir, "", "ask", "shop", "secret:GITHUB"); code != 0 || !strings.Contains(out, "opens a proposal") {
		t.Errorf("ask shop secret:GITHUB = %d %q %q", code, out, errs)
	}
}
