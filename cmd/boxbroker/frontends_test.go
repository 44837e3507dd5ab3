package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// frontEnd runs one operator action on one box through one front end.
type frontEnd struct {
	name string
	// method and route are what its audit rows name for each action.
	route func(action string) (method, route string)
	do    func(t *testing.T, action, box string)
	// has says whether the front end has the action.
	has func(action string) bool
}

// TestOperator_EveryActionThroughEveryFrontEnd runs each operator action
// of the service (a box's, a grant's, a Fountain id's, a pool entry's, an
// admin token's, the egress proxy CA's rotation) through each of the four
// front ends that has it (the CLI on the data directory, the CLI with
// --admin-url, the admin API, the owner's page, which assigns no Fountain
// ids and alone changes an entry's weight; admin tokens
// are made and revoked on the data directory only) and checks its effect in the store and the audit row it wrote,
// naming the front end.
func TestOperator_EveryActionThroughEveryFrontEnd(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	local := map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}
	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	cliArgs := map[string][]string{
		"add": {"box", "add"}, "rotate": {"box", "rotate"}, "bind": {"box", "bind", "--from", "10.0.0.0/8"},
		"pause": {"box", "pause"}, "resume": {"box", "resume"}, "consent": {"box", "consent"}, "remove": {"box", "remove", "--yes"},
		"grant": {"grant", "issue"}, "revoke": {"grant", "revoke"},
		"assign": {"box", "assign"}, "unassign": {"box", "unassign"},
		"secret": {"secret", "set", "--host", "https://api.stripe.com"}, "unsecret": {"secret", "remove", "--yes"},
		"visitor": {"visitor", "set"}, "unvisitor": {"visitor", "remove", "--yes"},
		"payer": {"box", "payer"}, "credential": {"credential", "set"}, "uncredential": {"credential", "remove", "--yes"},
		"budget": {"budget", "set"}, "unbudget": {"budget", "remove", "--yes"},
		"limit": {"limit", "set", "--rpm", "7"}, "unlimit": {"limit", "remove", "--yes"},
		"window": {"budget", "set", "--window", "day"}, "unwindow": {"budget", "remove", "--yes", "--window", "day"},
		"entry": {"credential", "add", "anthropic", "--weight", "2"}, "unentry": {"credential", "remove", "--yes", "anthropic"},
		"admintoken": {"admin", "token", "--name"}, "unadmintoken": {"admin", "revoke", "--yes"},
		"rotateca": {"proxy", "ca", "rotate", "--yes", "--grace", "1h"},
		"rules":    {"secret", "rules", "--allow", "get /v1/charges/**", "--rate", "5/m"},
	}
	cli := func(env map[string]string) func(t *testing.T, action, box string) {
		return func(t *testing.T, action, box string) {
			args := append(append([]string(nil), cliArgs[action]...), box)
			stdin := ""
			switch action {
			case "payer":
				args = append(args, "shared")
			case "credential", "uncredential":
				args, stdin = append(args[:len(args)-1], "fountain"), stripeValue+"\n"
			case "secret", "unsecret":
				args, stdin = append(args, "STRIPE"), stripeValue+"\n"
			case "visitor", "unvisitor":
				args, stdin = append(args[:len(args)-1], "github:"+box), visitorValue+"\n"
			case "consent":
				args = append(args, "on")
			case "budget", "window":
				args = append(args, "25.50")
			case "grant":
				args = append(args, "github:vee")
			case "revoke":
				args[2] = lastGrant(t, b, box)
			case "assign", "unassign":
				args = append(args, "sandbox", "sb-"+box)
			case "entry":
				stdin = visitorValue + "\n"
			case "unadmintoken":
				args[len(args)-1] = adminTokenNamed(t, b, box)
			case "rotateca":
				args = args[:len(args)-1]
			case "rules":
				args = append(args, "STRIPE")
			}
			if code, out, errs := runEnv(t, env, stdin, args...); code != 0 {
				t.Fatalf("%q = %d %q %q", args, code, out, errs)
			}
		}
	}
	apiRoutes := map[string][3]string{
		"add": {"POST", "/api/boxes", ""}, "rotate": {"POST", "/api/boxes/{name}/token", ""},
		"bind": {"PATCH", "/api/boxes/{name}", `{"from":["10.0.0.0/8"]}`}, "pause": {"PATCH", "/api/boxes/{name}", `{"paused":true}`},
		"resume": {"PATCH", "/api/boxes/{name}", `{"paused":false}`}, "consent": {"PATCH", "/api/boxes/{name}", `{"consent":true}`},
		"remove": {"DELETE", "/api/boxes/{name}", ""},
		"grant":  {"POST", "/api/boxes/{name}/grants", `{"principal":"github:vee"}`}, "revoke": {"DELETE", "/api/grants/{id}", ""},
		"assign":       {"POST", "/api/boxes/{name}/resources", `{"kind":"sandbox","id":"sb-{name}"}`},
		"unassign":     {"DELETE", "/api/boxes/{name}/resources/{kind}/{id}", ""},
		"secret":       {"PUT", "/api/boxes/{name}/secrets/{secret}", `{"host":"https://api.stripe.com","value":"` + stripeValue + `"}`},
		"unsecret":     {"DELETE", "/api/boxes/{name}/secrets/{secret}", ""},
		"visitor":      {"PUT", "/api/visitors/{principal}", `{"value":"` + visitorValue + `"}`},
		"unvisitor":    {"DELETE", "/api/visitors/{principal}", ""},
		"payer":        {"PUT", "/api/boxes/{name}/payer", `{"kind":"shared"}`},
		"credential":   {"PUT", "/api/credentials/{id}", `{"value":"` + stripeValue + `"}`},
		"uncredential": {"DELETE", "/api/credentials/{id}", ""},
		"budget":       {"PUT", "/api/boxes/{name}/budgets", `{"usd":25.50}`},
		"unbudget":     {"DELETE", "/api/boxes/{name}/budgets", ""},
		"window":       {"PUT", "/api/boxes/{name}/window-budgets", `{"window":"day","usd":25.50}`},
		"unwindow":     {"DELETE", "/api/boxes/{name}/window-budgets", ""},
		"limit":        {"PUT", "/api/boxes/{name}/rate-limits", `{"rpm":7}`},
		"unlimit":      {"DELETE", "/api/boxes/{name}/rate-limits", ""},
		"entry":        {"PUT", "/api/credentials/pool/{entry}", `{"value":"` + visitorValue + `","weight":2}`},
		"unentry":      {"DELETE", "/api/credentials/pool/{entry}", ""},
		"rotateca":     {"POST", "/api/proxy/ca/rotate", `{"grace":"1h"}`},
		"rules":        {"PUT", "/api/boxes/{name}/secrets/{secret}/rules", `{"rules":["get /v1/charges/**"],"rate":"5/m"}`},
	}
	apiRoute := func(action string) (string, string) { return apiRoutes[action][0], apiRoutes[action][1] }
	cookie, csrf := pageSession(t, b)
	pageForms := map[string][2]string{
		"add": {"/ui/boxes", "name={name}"}, "rotate": {"/ui/boxes/{name}/rotate", ""}, "bind": {"/ui/boxes/{name}/bind", "from=10.0.0.0/8"},
		"pause": {"/ui/boxes/{name}/settings", "set=paused&value=true"}, "resume": {"/ui/boxes/{name}/settings", "set=paused&value=false"},
		"consent": {"/ui/boxes/{name}/settings", "set=consent&value=true"}, "remove": {"/ui/boxes/{name}/remove", "confirm={name}"},
		"grant": {"/ui/boxes/{name}/grants", "principal=github:vee&ttl=15m"}, "revoke": {"/ui/boxes/{name}/grants/{id}/revoke", ""},
		"secret": {"/ui/boxes/{name}/secrets", "name=STRIPE&host=https://api.stripe.com&value=" + stripeValue}, "unsecret": {"/ui/boxes/{name}/secrets/{secret}/remove", ""},
		"budget": {"/ui/boxes/{name}/budget", "usd=25.50"}, "unbudget": {"/ui/boxes/{name}/budget/remove", ""},
		"window": {"/ui/boxes/{name}/window-budget", "window=day&usd=25.50"}, "unwindow": {"/ui/boxes/{name}/window-budget/remove", "window=day"},
		"limit": {"/ui/boxes/{name}/rate-limit", "rpm=7"}, "unlimit": {"/ui/boxes/{name}/rate-limit/remove", ""},
		"entry": {"/ui/credentials", "name={name}&weight=2&value=" + visitorValue}, "reweigh": {"/ui/credentials/{entry}", "weight=3"},
		"unentry":  {"/ui/credentials/{entry}/remove", "confirm={name}"},
		"rules":    {"/ui/boxes/{name}/secrets/{secret}/rules", "rules=get+/v1/charges/**&rate=5/m"},
		"rotateca": {"/ui/proxy/ca/rotate", "grace=1h&confirm=rotate"},
	}
	fronts := []frontEnd{
		{"cli", func(a string) (string, string) {
			if a == "rotateca" {
				return "CLI", "proxy ca rotate"
			}
			return "CLI", strings.Join(cliArgs[a][:2], " ")
		}, cli(local), keyOf(cliArgs)},
		{"cli-admin-url", apiRoute, cli(remote), func(a string) bool { return keyOf(cliArgs)(a) && keyOf(apiRoutes)(a) }},
		{"api", apiRoute, func(t *testing.T, action, box string) {
			rt := apiRoutes[action]
			path := strings.NewReplacer("{name}", box, "{secret}", "STRIPE", "{principal}", "github:"+box, "{entry}", box).Replace(rt[1])
			switch action {
			case "revoke":
				path = strings.ReplaceAll(path, "{id}", lastGrant(t, b, box))
			case "unassign":
				path = strings.NewReplacer("{kind}", "sandbox", "{id}", "sb-"+box).Replace(path)
			case "credential", "uncredential":
				path = strings.ReplaceAll(path, "{id}", "fountain")
			case "unwindow":
				path += "?window=day"
			}
			body := strings.ReplaceAll(rt[2], "{name}", box)
			if action == "add" {
				body = `{"name":"` + box + `"}`
			}
			req, _ := http.NewRequest(rt[0], b.AdminURL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+b.AdminToken)
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			rb, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Fatalf("%s %s = %d %s", rt[0], path, resp.StatusCode, rb)
			}
		}, keyOf(apiRoutes)},
		{"page", func(a string) (string, string) { return "POST", pageForms[a][0] }, func(t *testing.T, action, box string) {
			f := pageForms[action]
			form, _ := url.ParseQuery(strings.ReplaceAll(f[1], "{name}", box))
			form.Set("csrf", csrf)
			path := strings.NewReplacer("{name}", box, "{secret}", "STRIPE", "{entry}", box).Replace(f[0])
			if action == "revoke" {
				path = strings.ReplaceAll(path, "{id}", lastGrant(t, b, box))
			}
			req, _ := http.NewRequest("POST", b.AdminURL+path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: cookie})
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			rb, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s = %d %s", f[0], resp.StatusCode, rb)
			}
		}, keyOf(pageForms)},
	}
	actions := []struct {
		action  string
		message string
		effect  func(before, after store.Box, err error) bool
		grants  string // for a grant action, the state of the box's newest grant after it
		secret  bool   // for a secret action, whether the box holds STRIPE after it
		budget  bool   // whether the box holds its own monthly budget after it
		window  bool   // whether the box holds its own daily budget after it
		limit   bool   // whether the box holds its own rate limit of 7 requests a minute after it
	}{
		{"add", "enrolled the box", func(_, a store.Box, err error) bool { return err == nil && a.TokenHash != "" }, "", false, false, false, false},
		{"rotate", "rotated the box's token", func(b, a store.Box, err error) bool { return err == nil && a.TokenHash != b.TokenHash }, "", false, false, false, false},
		{"bind", "bound the box's token to 10.0.0.0/8", func(_, a store.Box, err error) bool { return err == nil && store.FormatFrom(a.From) == "10.0.0.0/8" }, "", false, false, false, false},
		{"pause", "paused the box", func(_, a store.Box, err error) bool { return err == nil && a.Paused }, "", false, false, false, false},
		{"resume", "resumed the box", func(_, a store.Box, err error) bool { return err == nil && !a.Paused }, "", false, false, false, false},
		{"consent", "set the box's consent on", func(_, a store.Box, err error) bool { return err == nil && a.Consent }, "", false, false, false, false},
		{"grant", "issued grant", func(_, _ store.Box, err error) bool { return err == nil }, "current", false, false, false, false},
		{"revoke", "revoked grant", func(_, _ store.Box, err error) bool { return err == nil }, "revoked", false, false, false, false},
		{"assign", "assigned Fountain sandbox", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"unassign", "unassigned Fountain sandbox", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"payer", "set the box's payer to shared", func(_, a store.Box, err error) bool { return err == nil && a.PayerKind == "shared" }, "", false, false, false, false},
		{"secret", "set the secret STRIPE", func(_, _ store.Box, err error) bool { return err == nil }, "", true, false, false, false},
		{"rules", operator.RulesMessage("STRIPE", []string{"GET /v1/charges/**"}, "5/m"), func(_, _ store.Box, err error) bool { return err == nil }, "", true, false, false, false},
		{"unsecret", "removed secret STRIPE", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"visitor", "set visitor github:", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"unvisitor", "removed visitor github:", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"credential", "set the fountain credential (bearer key)", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"uncredential", "removed the fountain credential", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"budget", "set the box's monthly budget to $25.50", func(_, _ store.Box, err error) bool { return err == nil }, "", false, true, false, false},
		{"unbudget", "removed the box's monthly budget", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"window", "set the box's daily budget to $25.50", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, true, false},
		{"unwindow", "removed the day budget of the box", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"limit", "set the rate limit of the box to 0 input tokens, 0 output tokens and 7 requests", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, true},
		{"unlimit", "removed the rate limit of the box", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"entry", "set credential pool entry via-", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"reweigh", "changed credential pool entry via-", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"unentry", "removed credential pool entry via-", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"admintoken", "made admin token adm-", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"unadmintoken", "revoked admin token adm-", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"rotateca", "rotated the egress proxy's CA; the new one signs from ", func(_, _ store.Box, err error) bool { return err == nil }, "", false, false, false, false},
		{"remove", "removed the box and all kept for it", func(_, _ store.Box, err error) bool { return errors.Is(err, store.ErrNotFound) }, "", false, false, false, false},
	}
	for _, fe := range fronts {
		box := "via-" + fe.name
		for _, tt := range actions {
			if !fe.has(tt.action) {
				continue
			}
			before, _ := b.Server.Store.Box(ctx, box)
			caBefore, _ := b.Server.Store.ProxyCA(ctx)
			fe.do(t, tt.action, box)
			if caAfter, _ := b.Server.Store.ProxyCA(ctx); (string(caAfter.CertPEM)+string(caAfter.NextCertPEM) != string(caBefore.CertPEM)+string(caBefore.NextCertPEM)) != (tt.action == "rotateca") {
				t.Errorf("%s through %s: the proxy's CA changed %v, want %v", tt.action, fe.name, tt.action != "rotateca", tt.action == "rotateca")
			}
			after, err := b.Server.Store.Box(ctx, box)
			if !tt.effect(before, after, err) {
				t.Errorf("%s through %s: the box is %+v, %v after it, want it %s", tt.action, fe.name, after, err, tt.message)
			}
			if owner, err := b.Server.Store.ResourceOwner(ctx, store.ResourceSandbox, "sb-"+box); (tt.action == "assign") != (err == nil && owner == box) {
				t.Errorf("%s through %s: sb-%s is box %q's (%v)", tt.action, fe.name, box, owner, err)
			}
			if _, err := b.Server.Store.Secret(ctx, box, "STRIPE"); (err == nil) != tt.secret {
				t.Errorf("%s through %s: the box's secret STRIPE: %v, want held %v", tt.action, fe.name, err, tt.secret)
			}
			if sec, err := b.Server.Store.Secret(ctx, box, "STRIPE"); err == nil {
				value, err := b.Server.Keyring.Open(sec.Sealed, secrets.SecretAD(box, "STRIPE"))
				if rules := tt.action == "rules"; err != nil || string(value) != stripeValue || slices.Equal(sec.Rules, []string{"GET /v1/charges/**"}) != rules || (sec.Rate == "5/m") != rules {
					t.Errorf("%s through %s: STRIPE holds the rules %q, rate %q and its value %v (%v), want the rules and rate set %v and the value kept",
						tt.action, fe.name, sec.Rules, sec.Rate, string(value) == stripeValue, err, rules)
				}
			}
			if _, err := b.Server.Store.Credential(ctx, payer.VisitorAnthropic("github:"+box)); (err == nil) != (tt.action == "visitor") {
				t.Errorf("%s through %s: github:%s's credential: %v", tt.action, fe.name, box, err)
			}
			if _, err := b.Server.Store.Credential(ctx, "fountain"); (err == nil) != (tt.action == "credential") {
				t.Errorf("%s through %s: the fountain credential: %v", tt.action, fe.name, err)
			}
			if bs, err := b.Server.Store.ListBudgets(ctx, box); tt.action != "remove" && (err != nil || (len(bs) == 1 && bs[0].Principal == "" && bs[0].Limit == 25_500_000) != tt.budget) {
				t.Errorf("%s through %s: budgets %+v, %v, want the box's own $25.50 held %v", tt.action, fe.name, bs, err, tt.budget)
			}
			if ws, err := b.Server.Store.ListWindowBudgets(ctx, box); tt.action != "remove" && (err != nil || (len(ws) == 1 && ws[0].Window == "day" && ws[0].Limit == 25_500_000) != tt.window) {
				t.Errorf("%s through %s: window budgets %+v, %v, want the box's own daily $25.50 held %v", tt.action, fe.name, ws, err, tt.window)
			}
			if ls, err := b.Server.Store.ListRateLimits(ctx, box); tt.action != "remove" && (err != nil || (len(ls) == 1 && ls[0].Principal == "" && ls[0].RPM == 7) != tt.limit) {
				t.Errorf("%s through %s: rate limits %+v, %v, want the box's own 7 a minute held %v", tt.action, fe.name, ls, err, tt.limit)
			}
			if w := entryWeight(t, b, box); w != map[string]int{"entry": 2, "reweigh": 3}[tt.action] {
				t.Errorf("%s through %s: pool entry %s has weight %d (0: none)", tt.action, fe.name, box, w)
			}
			if ts, err := b.Server.Store.ListAdminTokens(ctx); err != nil || slices.ContainsFunc(ts, func(a store.AdminToken) bool { return a.Name == box }) != (tt.action == "admintoken") {
				t.Errorf("%s through %s: admin tokens %+v, %v, want one named %s %v", tt.action, fe.name, ts, err, box, tt.action == "admintoken")
			}
			if tt.grants != "" {
				gs, err := b.Server.Store.ListGrants(ctx, box)
				if err != nil || len(gs) == 0 || (tt.grants == "revoked") != !gs[0].RevokedAt.IsZero() {
					t.Errorf("%s through %s: grants %+v, %v, want the newest %s", tt.action, fe.name, gs, err, tt.grants)
				}
			}
			entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 1})
			method, route := fe.route(tt.action)
			if err != nil || len(entries) != 1 {
				t.Fatalf("%s through %s: audit = %v, %v", tt.action, fe.name, entries, err)
			}
			if e := entries[0]; e.Capability != store.ActorAdmin || !strings.HasPrefix(e.Message, tt.message) || e.Method != method || e.Route != route {
				t.Errorf("%s through %s: audit row = %s %s %q by %s, want %s %s %q by %s",
					tt.action, fe.name, e.Method, e.Route, e.Message, e.Capability, method, route, tt.message, store.ActorAdmin)
			}
		}
	}
}

// stripeValue is the value the front-end test sets as a secret.
const stripeValue = "sk_live_0123456789abcdef"

// visitorValue is the credential the front-end test sets for a visitor.
const visitorValue = "sk-ant-api03-VISITOR0123456789"

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// pageSession signs in to the owner's page and returns the session's
// cookie and CSRF secret.
func pageSession(t *testing.T, b *brokertest.Broker) (cookie, csrf string) {
	t.Helper()
	resp, err := noFollow.PostForm(b.AdminURL+"/ui/signin", url.Values{"token": {b.AdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == ui.SessionCookie {
			cookie = c.Value
		}
	}
	req, _ := http.NewRequest("GET", b.AdminURL+"/ui/", nil)
	req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: cookie})
	resp, err = noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(body)
	if cookie == "" || m == nil {
		t.Fatalf("sign-in to the page: cookie %q, csrf %v", cookie, m)
	}
	return cookie, string(m[1])
}

// lastGrant is the ID of box's newest grant.
func lastGrant(t *testing.T, b *brokertest.Broker, box string) string {
	t.Helper()
	gs, err := b.Server.Store.ListGrants(context.Background(), box)
	if err != nil || len(gs) == 0 {
		t.Fatalf("grants of %s: %v, %v", box, gs, err)
	}
	return gs[0].ID
}

// entryWeight is the weight of the credential pool's entry name, 0 when
// there is none.
func entryWeight(t *testing.T, b *brokertest.Broker, name string) int {
	t.Helper()
	es, err := b.Server.Store.PoolEntries(context.Background())
	if err != nil {
		t.Fatalf("pool entries: %v", err)
	}
	for _, e := range es {
		if e.Name == name {
			return e.Weight
		}
	}
	return 0
}

// adminTokenNamed is the ID of the admin token named name.
func adminTokenNamed(t *testing.T, b *brokertest.Broker, name string) string {
	t.Helper()
	ts, err := b.Server.Store.ListAdminTokens(context.Background())
	if err != nil {
		t.Fatalf("admin tokens: %v", err)
	}
	for _, a := range ts {
		if a.Name == name {
			return a.ID
		}
	}
	t.Fatalf("no admin token named %s in %+v", name, ts)
	return ""
}

// keyOf says whether an action is a key of m.
func keyOf[V any](m map[string]V) func(string) bool {
	return func(a string) bool {
		_, ok := m[a]
		return ok
	}
}

// TestOperator_MakingTheProxyCAIsAuditedThroughEveryFrontEnd reads the
// egress proxy's CA twice through each front end, each on a broker that
// holds no CA yet: the CLI on the data directory (`proxy ca`), the CLI
// with --admin-url, the admin API (GET /api/proxy/ca) and serve's start
// of the egress proxy make the CA on the first read and write one audit
// row naming the front end, and the second read writes none; the owner's page (its Proxy CA page and its
// download) makes no CA and writes no row. It is apart from
// TestOperator_EveryActionThroughEveryFrontEnd because a broker makes
// its CA once.
func TestOperator_MakingTheProxyCAIsAuditedThroughEveryFrontEnd(t *testing.T) {
	ctx := context.Background()
	const made = "made the egress proxy's CA"
	tests := []struct {
		name          string
		method, route string // of the audit row; "" for none
		read          func(t *testing.T, b *brokertest.Broker)
	}{
		{"cli", "CLI", "proxy ca", func(t *testing.T, b *brokertest.Broker) {
			if code, out, errs := runEnv(t, map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}, "", "proxy", "ca"); code != 0 || !strings.HasPrefix(out, "-----BEGIN CERTIFICATE-----") {
				t.Fatalf("proxy ca = %d %q %q", code, out, errs)
			}
		}},
		{"cli-admin-url", "GET", "/api/proxy/ca", func(t *testing.T, b *brokertest.Broker) {
			env := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
			if code, out, errs := runEnv(t, env, "", "proxy", "ca"); code != 0 || !strings.HasPrefix(out, "-----BEGIN CERTIFICATE-----") {
				t.Fatalf("proxy ca --admin-url = %d %q %q", code, out, errs)
			}
		}},
		{"api", "GET", "/api/proxy/ca", func(t *testing.T, b *brokertest.Broker) {
			if resp := b.Admin("GET", "/api/proxy/ca", b.AdminToken, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /api/proxy/ca = %d %s", resp.StatusCode, resp.Body)
			}
		}},
		{"serve", "CLI", "serve", func(t *testing.T, b *brokertest.Broker) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			pctx, stop := context.WithCancel(ctx)
			c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
			wait, err := startProxy(pctx, c, b.Server, ln, nil)
			if err != nil {
				stop()
				t.Fatalf("the egress proxy's start: %v", err)
			}
			stop()
			if err := wait(); err != nil {
				t.Errorf("the egress proxy's end: %v", err)
			}
		}},
		{"page", "", "", func(t *testing.T, b *brokertest.Broker) {
			cookie, _ := pageSession(t, b)
			for _, path := range []string{"/ui/proxy", "/ui/proxy/ca.pem"} {
				req, _ := http.NewRequest("GET", b.AdminURL+path, nil)
				req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: cookie})
				resp, err := noFollow.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if want := map[string]int{"/ui/proxy": http.StatusOK, "/ui/proxy/ca.pem": http.StatusNotFound}[path]; resp.StatusCode != want {
					t.Fatalf("GET %s = %d, want %d", path, resp.StatusCode, want)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := brokertest.New(t, brokertest.Options{})
			for i := range 2 {
				tt.read(t, b)
				_, err := b.Server.Store.ProxyCA(ctx)
				if (err == nil) != (tt.route != "") {
					t.Errorf("read %d through %s: the store's CA: %v, want one made %v", i+1, tt.name, err, tt.route != "")
				}
				es, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				var rows []string
				for _, e := range es {
					if strings.HasPrefix(e.Message, made) {
						rows = append(rows, e.Method+" "+e.Route+" "+e.Capability)
					}
				}
				want := []string(nil)
				if tt.route != "" {
					want = []string{tt.method + " " + tt.route + " " + store.ActorAdmin}
				}
				if !slices.Equal(rows, want) {
					t.Errorf("after read %d through %s: audit rows %q, want %q", i+1, tt.name, rows, want)
				}
			}
		})
	}
}
