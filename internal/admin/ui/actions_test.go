package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// signedInForm signs in and returns the cookie and the session's CSRF
// secret, read from the list page.
func signedInForm(t *testing.T, b *brokertest.Broker) (cookie, csrf string) {
	t.Helper()
	cookie = signIn(t, b, b.AdminToken)
	return cookie, csrfOf(t, visit(t, b, "GET", "/ui/", cookie, nil, nil).body)
}

// adminEntries are the audit log's entries for box recorded as the
// admin's actions, newest first.
func adminEntries(t *testing.T, b *brokertest.Broker, box string) []store.AuditEntry {
	t.Helper()
	all, err := b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Box: box, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEntry
	for _, e := range all {
		if e.Capability == store.ActorAdmin {
			out = append(out, e)
		}
	}
	return out
}

// TestUI_ActionsNeedCSRF is the cross-site attack on each new form: a post
// without the session's CSRF secret, or from another origin, is refused
// and changes nothing.
func TestUI_ActionsNeedCSRF(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	cookie, csrf := signedInForm(t, b)
	posts := []struct {
		path string
		form url.Values
	}{
		{"/ui/boxes", url.Values{"name": {"mallory"}}},
		{"/ui/boxes/alpha/rotate", url.Values{}},
		{"/ui/boxes/alpha/remove", url.Values{"confirm": {"alpha"}}},
		{"/ui/boxes/alpha/budget", url.Values{"usd": {"1"}}},
		{"/ui/boxes/alpha/secrets", url.Values{"name": {"STRIPE"}, "host": {"https://evil.example"}, "value": {"0123456789abcdef"}}},
	}
	for _, p := range posts {
		for _, tt := range []struct {
			name   string
			csrf   string
			origin string
		}{
			{"no csrf", "", ""},
			{"wrong csrf", strings.Repeat("0", len(csrf)), ""},
			{"other origin", csrf, "https://evil.example"},
		} {
			form := url.Values{}
			for k, v := range p.form {
				form[k] = v
			}
			if tt.csrf != "" {
				form.Set("csrf", tt.csrf)
			}
			h := map[string]string{}
			if tt.origin != "" {
				h["Origin"] = tt.origin
			}
			if got := visit(t, b, "POST", p.path, cookie, form, h); got.status != http.StatusForbidden {
				t.Errorf("POST %s (%s) = %d, want 403", p.path, tt.name, got.status)
			}
		}
	}
	ctx := context.Background()
	if _, err := b.Server.Store.Box(ctx, "mallory"); err == nil {
		t.Errorf("a post without CSRF enrolled a box")
	}
	if bx, err := b.Server.Store.BoxByTokenHash(ctx, token.Hash(tok)); err != nil || bx.Name != "alpha" {
		t.Errorf("alpha's token after refused posts = %v, %v, want it to stand", bx.Name, err)
	}
	if bs, _ := b.Server.Store.ListBudgets(ctx, "alpha"); len(bs) != 0 {
		t.Errorf("a post without CSRF set a budget: %v", bs)
	}
	if ss, _ := b.Server.Store.ListSecrets(ctx, "alpha"); len(ss) != 0 {
		t.Errorf("a post without CSRF set a secret: %v", ss)
	}
	if es := adminEntries(t, b, "alpha"); len(es) != 0 {
		t.Errorf("refused posts were audited as actions: %v", es)
	}
}

var tokenRE = regexp.MustCompile(`<pre class="grant-value" id="box-token">([^<]+)</pre>`)

// TestUI_EnrolRotateRemove enrols a box (its token shown once and
// working, on no page after), rotates its token (the old one refused at
// once), and removes it only when its name is typed again; each action
// is audited with the admin as actor.
func TestUI_EnrolRotateRemove(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	cookie, csrf := signedInForm(t, b)
	if p := visit(t, b, "GET", "/ui/enrol", cookie, nil, nil); p.status != 200 || !strings.Contains(p.body, `action="/ui/boxes"`) {
		t.Fatalf("GET /ui/enrol = %d", p.status)
	}
	for _, bad := range []string{"", "Alpha", "a b", "-x", strings.Repeat("a", 64)} {
		if p := visit(t, b, "POST", "/ui/boxes", cookie, url.Values{"csrf": {csrf}, "name": {bad}}, nil); p.status != 400 || !strings.Contains(p.body, "A box name matches") {
			t.Errorf("enrol %q = %d, want 400 naming the rule", bad, p.status)
		}
	}
	p := visit(t, b, "POST", "/ui/boxes", cookie, url.Values{"csrf": {csrf}, "name": {"delta"}}, nil)
	m := tokenRE.FindStringSubmatch(p.body)
	if p.status != 200 || m == nil || p.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("enrol delta = %d, Cache-Control %q, token shown %v", p.status, p.header.Get("Cache-Control"), m != nil)
	}
	first := m[1]
	if r := b.Do("POST", protocol.RouteDeclaration, first, []byte(`{"capabilities":[]}`), nil); r.StatusCode != 200 {
		t.Errorf("a report with the shown token = %d, want 200", r.StatusCode)
	}
	if p := visit(t, b, "POST", "/ui/boxes", cookie, url.Values{"csrf": {csrf}, "name": {"delta"}}, nil); p.status != 409 || strings.Contains(p.body, first) {
		t.Errorf("enrol delta again = %d, want 409 without the token", p.status)
	}
	for _, path := range []string{"/ui/", "/ui/boxes/delta", "/ui/boxes/delta/remove"} {
		if p := visit(t, b, "GET", path, cookie, nil, nil); strings.Contains(p.body, first) || strings.Contains(p.body, token.Hash(first)) {
			t.Errorf("GET %s shows delta's token or its hash after it was shown once", path)
		}
	}

	p = visit(t, b, "POST", "/ui/boxes/delta/rotate", cookie, url.Values{"csrf": {csrf}}, nil)
	m = tokenRE.FindStringSubmatch(p.body)
	if p.status != 200 || m == nil || m[1] == first || !strings.Contains(p.body, "old token stopped working") {
		t.Fatalf("rotate delta = %d, new token shown %v", p.status, m != nil)
	}
	if r := b.Do("POST", protocol.RouteDeclaration, first, []byte(`{"capabilities":[]}`), nil); r.StatusCode != 401 {
		t.Errorf("a report with the old token after rotating = %d, want 401", r.StatusCode)
	}
	if r := b.Do("POST", protocol.RouteDeclaration, m[1], []byte(`{"capabilities":[]}`), nil); r.StatusCode != 200 {
		t.Errorf("a report with the new token = %d, want 200", r.StatusCode)
	}

	if p := visit(t, b, "GET", "/ui/boxes/delta/remove", cookie, nil, nil); p.status != 200 || !strings.Contains(p.body, "Remove delta?") {
		t.Errorf("GET the confirmation page = %d", p.status)
	}
	for _, wrong := range []string{"", "Delta", "delta ", "alpha"} {
		if p := visit(t, b, "POST", "/ui/boxes/delta/remove", cookie, url.Values{"csrf": {csrf}, "confirm": {wrong}}, nil); p.status != 400 {
			t.Errorf("remove delta confirmed as %q = %d, want 400", wrong, p.status)
		}
	}
	if _, err := b.Server.Store.Box(context.Background(), "delta"); err != nil {
		t.Fatalf("delta after unconfirmed removals: %v, want it kept", err)
	}
	if p := visit(t, b, "POST", "/ui/boxes/delta/remove", cookie, url.Values{"csrf": {csrf}, "confirm": {"delta"}}, nil); p.status != 303 {
		t.Errorf("remove delta confirmed = %d, want 303", p.status)
	}
	if _, err := b.Server.Store.Box(context.Background(), "delta"); err == nil {
		t.Errorf("delta is still there after a confirmed removal")
	}
	var got []string
	for _, e := range adminEntries(t, b, "delta") {
		got = append(got, e.Message)
		if strings.Contains(e.Message, first) || strings.Contains(e.Message, m[1]) {
			t.Errorf("audit entry %q holds a token", e.Message)
		}
	}
	want := []string{"removed the box and all kept for it", "rotated the box's token", "enrolled the box"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("delta's admin audit entries = %q, want %q", got, want)
	}
}

// TestUI_SecretFormKeepsBodyFields: a value set again from the page
// keeps the body fields its secret names, which the page has no field
// for, so the app that sends its key in one goes on working.
func TestUI_SecretFormKeepsBodyFields(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	cookie, csrf := signedInForm(t, b)
	b.SetSecret("alpha", "AUTH", "https://auth.example.com", "cs_0123456789-value", "client_secret")
	form := url.Values{"csrf": {csrf}, "name": {"AUTH"}, "host": {"https://auth.example.com"}, "value": {"cs_replaced-value-0123"}}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets", cookie, form, nil); p.status != 303 {
		t.Fatalf("replace AUTH = %d, want 303", p.status)
	}
	if sec, err := b.Server.Store.Secret(context.Background(), "alpha", "AUTH"); err != nil || len(sec.BodyFields) != 1 || sec.BodyFields[0] != "client_secret" {
		t.Errorf("AUTH's body fields after the form = %q, %v, want [client_secret] kept", sec.BodyFields, err)
	}
}

// TestUI_SecretForm sets, replaces and removes an egress secret from the
// page, with the host checked as the CLI checks it, and is the attack on
// the value: no answer, page or audit entry ever holds it, refused or not.
func TestUI_SecretForm(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	if r := b.Do("POST", protocol.RouteDeclaration, tok, []byte(`{"capabilities":[{"name":"egress","broker":"lobby","scope":["GITHUB","STRIPE"]}]}`), nil); r.StatusCode != 200 {
		t.Fatalf("report = %d", r.StatusCode)
	}
	cookie, csrf := signedInForm(t, b)
	const value = "sk_live_0123456789-value"
	post := func(name, host, v string) page {
		t.Helper()
		return visit(t, b, "POST", "/ui/boxes/alpha/secrets", cookie, url.Values{"csrf": {csrf}, "name": {name}, "host": {host}, "value": {v}}, nil)
	}
	tests := []struct {
		name, host, value, want string
	}{
		{"stripe", "https://api.stripe.com", value, "A secret name matches"},
		{"STRIPE", "ftp://api.stripe.com", value, "The secret&#39;s host"},
		{"STRIPE", "https://user:pass@api.stripe.com", value, "must not hold a user or password"},
		{"STRIPE", "https://user:" + value + "@api.stripe.com", value, "The host holds the secret&#39;s value"},
		{"STRIPE", "https://api.stripe.com/?q=" + value, value, "The host holds the secret&#39;s value"},
		{"STRIPE", "https://api.stripe.com", "short", "shorter than"},
		{"STRIPE", "https://api.stripe.com", value + "\n", "control character"},
	}
	for _, tt := range tests {
		p := post(tt.name, tt.host, tt.value)
		if p.status != 400 || !strings.Contains(p.body, tt.want) {
			t.Errorf("set %s for %q = %d, want 400 saying %q:\n%s", tt.name, tt.host, p.status, tt.want, p.body)
		}
		if strings.Contains(p.body, value) || tt.value == "short" && strings.Contains(p.body, "short<") {
			t.Errorf("the refusal of %s for %q repeats the value", tt.name, tt.host)
		}
	}
	p := post("STRIPE", "https://api.stripe.com", value)
	if p.status != 303 || strings.Contains(p.header.Get("Location"), value) {
		t.Fatalf("set STRIPE = %d to %q, want 303 to the box", p.status, p.header.Get("Location"))
	}
	sec, err := b.Server.Store.Secret(context.Background(), "alpha", "STRIPE")
	if err != nil || sec.Host != "https://api.stripe.com" || strings.Contains(string(sec.Sealed), value) {
		t.Fatalf("STRIPE after the form = %+v, %v, want it sealed for https://api.stripe.com", sec.Host, err)
	}
	page := visit(t, b, "GET", "/ui/boxes/alpha?done=secret", cookie, nil, nil)
	if strings.Contains(page.body, value) {
		t.Errorf("alpha's page holds the secret's value")
	}
	for _, want := range []string{"Declared but not held: <code>GITHUB</code>", "STRIPE", "https://api.stripe.com", "never shown again"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("alpha's page lacks %q", want)
		}
	}
	if strings.Contains(page.body, `id="secrets-extra"`) {
		t.Errorf("alpha's page flags a held secret as undeclared")
	}
	if p := post("STRIPE", "https://api.stripe.com/v1", "sk_live_replaced-value"); p.status != 303 {
		t.Errorf("replace STRIPE = %d, want 303", p.status)
	}
	if p := post("SLACK", "https://slack.com", "xoxb-0123456789"); p.status != 303 {
		t.Errorf("set SLACK = %d, want 303", p.status)
	}
	page = visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	if !strings.Contains(page.body, "Held but not declared: <code>SLACK</code>") || strings.Contains(page.body, "xoxb-0123456789") {
		t.Errorf("alpha's page does not flag SLACK as held and undeclared, or shows its value")
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets/SLACK/remove", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 303 {
		t.Errorf("remove SLACK = %d, want 303", p.status)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets/SLACK/remove", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 404 {
		t.Errorf("remove SLACK again = %d, want 404", p.status)
	}
	for _, e := range adminEntries(t, b, "alpha") {
		if strings.Contains(e.Message, value) || strings.Contains(e.Message, "replaced-value") || strings.Contains(e.Message, "xoxb") {
			t.Errorf("audit entry %q holds a secret's value", e.Message)
		}
	}
	if n := len(adminEntries(t, b, "alpha")); n != 4 {
		t.Errorf("alpha has %d admin audit entries, want 4 (set, replace, set, remove)", n)
	}
}

// TestUI_BudgetFormAndBlocked sets a budget from the page and, once a call
// is refused for it, the box's page says so plainly, with the bound the
// broker computed for that call, what is left and when it resets; the
// list shows the box as blocked by budget.
func TestUI_BudgetFormAndBlocked(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	if r := b.Do("POST", protocol.RouteDeclaration, tok, []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`), nil); r.StatusCode != 200 {
		t.Fatalf("report = %d", r.StatusCode)
	}
	cookie, csrf := signedInForm(t, b)
	for _, bad := range []string{"", "abc", "-1", "1.0000001", "1e9"} {
		if p := visit(t, b, "POST", "/ui/boxes/alpha/budget", cookie, url.Values{"csrf": {csrf}, "usd": {bad}}, nil); p.status != 400 {
			t.Errorf("budget %q = %d, want 400", bad, p.status)
		}
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/budget", cookie, url.Values{"csrf": {csrf}, "usd": {"0.0001"}}, nil); p.status != 303 {
		t.Fatalf("budget $0.0001 = %d, want 303", p.status)
	}
	r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(brokertest.MessagesBody), http.Header{"Content-Type": {"application/json"}})
	if r.StatusCode != 403 || !strings.Contains(string(r.Body), "could cost up to") {
		t.Fatalf("a call over the budget = %d %s, want 403", r.StatusCode, r.Body)
	}
	bound := regexp.MustCompile(`could cost up to (\$[0-9.]*[0-9])`).FindStringSubmatch(string(r.Body))
	if err := b.Server.Audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	want := "Blocked: the next call could cost up to " + bound[1] + " and $0.0001 is left of its own budget ($0.0001). It resets on "
	if !strings.Contains(p.body, want) {
		t.Errorf("alpha's page lacks %q:\n%s", want, p.body)
	}
	if p := visit(t, b, "GET", "/ui/?state=blocked", cookie, nil, nil); !strings.Contains(p.body, `href="/ui/boxes/alpha"`) {
		t.Errorf("the list of blocked boxes lacks alpha")
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/budget/remove", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 303 {
		t.Errorf("remove the budget = %d, want 303", p.status)
	}
	if p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil); strings.Contains(p.body, "Blocked:") {
		t.Errorf("alpha's page says it is blocked after its budget was removed")
	}
	// The list reads the budgets as they are now, not the refusal alone:
	// with the budget removed, or raised past the call's bound, alpha is
	// not blocked though no call was served since.
	if p := visit(t, b, "GET", "/ui/?state=blocked", cookie, nil, nil); strings.Contains(p.body, `href="/ui/boxes/alpha"`) {
		t.Errorf("the list of blocked boxes holds alpha after its budget was removed")
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/budget", cookie, url.Values{"csrf": {csrf}, "usd": {"100"}}, nil); p.status != 303 {
		t.Fatalf("budget $100 = %d, want 303", p.status)
	}
	if p := visit(t, b, "GET", "/ui/?state=blocked", cookie, nil, nil); strings.Contains(p.body, `href="/ui/boxes/alpha"`) {
		t.Errorf("the list of blocked boxes holds alpha after its budget was raised")
	}
	if p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil); strings.Contains(p.body, "Blocked:") {
		t.Errorf("alpha's page says it is blocked after its budget was raised")
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/budget/remove", cookie, url.Values{"csrf": {csrf}}, nil); p.status != 303 {
		t.Errorf("remove the budget = %d, want 303", p.status)
	}
	var got []string
	for _, e := range adminEntries(t, b, "alpha") {
		got = append(got, e.Message)
	}
	if strings.Join(got, "|") != "removed the box's monthly budget|set the box's monthly budget to $100.00|removed the box's monthly budget|set the box's monthly budget to $0.0001" {
		t.Errorf("alpha's admin audit entries = %q", got)
	}
}
