package ui_test

import (
	"context"
	"html"
	"math"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

var grantValueRE = regexp.MustCompile(`id="grant-value">([^<]+)<`)

// TestUI_IssueGrant issues a grant through the box page's form: the value
// is shown once, on the answer, and works at once; it is in no later page.
// A form without the session's secret, or with a bad principal or ttl,
// issues nothing.
func TestUI_IssueGrant(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	box := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.SetCredential(payer.VisitorAnthropic("github:ann"), visitorKey)
	b.Report(box, brokertest.Entry("inference", "agent"))
	ctx := context.Background()
	cookie := signIn(t, b, b.AdminToken)
	boxPage := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	if !strings.Contains(boxPage.body, `action="/ui/boxes/alpha/grants"`) || !strings.Contains(boxPage.body, `value="15m"`) {
		t.Fatalf("alpha's page has no grant form with the default lifetime:\n%s", boxPage.body)
	}
	csrf := csrfOf(t, boxPage.body)

	bad := []struct {
		name   string
		form   url.Values
		header map[string]string
		status int
	}{
		{"no csrf", url.Values{"principal": {"github:ann"}, "ttl": {"15m"}}, nil, 403},
		{"other origin", url.Values{"csrf": {csrf}, "principal": {"github:ann"}}, map[string]string{"Origin": "https://evil.example"}, 403},
		{"bad principal", url.Values{"csrf": {csrf}, "principal": {"git hub"}, "ttl": {"15m"}}, nil, 400},
		{"no principal", url.Values{"csrf": {csrf}, "ttl": {"15m"}}, nil, 400},
		{"ttl over the bound", url.Values{"csrf": {csrf}, "principal": {"github:ann"}, "ttl": {"48h"}}, nil, 400},
		{"ttl not a duration", url.Values{"csrf": {csrf}, "principal": {"github:ann"}, "ttl": {"a while"}}, nil, 400},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if p := visit(t, b, "POST", "/ui/boxes/alpha/grants", cookie, tt.form, tt.header); p.status != tt.status {
				t.Errorf("POST grants (%s) = %d, want %d:\n%s", tt.name, p.status, tt.status, p.body)
			}
		})
	}
	if p := visit(t, b, "POST", "/ui/boxes/nobox/grants", cookie, url.Values{"csrf": {csrf}, "principal": {"github:ann"}}, nil); p.status != 404 {
		t.Errorf("POST grants for no box = %d, want 404", p.status)
	}
	if gs, err := b.Server.Store.ListGrants(ctx, "alpha"); err != nil || len(gs) != 0 {
		t.Fatalf("grants after refused forms = %d, %v, want none issued", len(gs), err)
	}

	p := visit(t, b, "POST", "/ui/boxes/alpha/grants", cookie, url.Values{"csrf": {csrf}, "principal": {" github:ann "}, "ttl": {"2h"}}, nil)
	if p.status != 200 || !strings.Contains(p.body, "Copy it now") || !strings.Contains(p.body, "for 2h") {
		t.Fatalf("POST grants = %d, want the issued grant's page saying to copy it now:\n%s", p.status, p.body)
	}
	if cc := p.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the issued grant's page Cache-Control = %q, want no-store", cc)
	}
	m := grantValueRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the issued grant's page shows no value:\n%s", p.body)
	}
	value := html.UnescapeString(m[1])
	if !protocol.IsGrantValue(value) {
		t.Fatalf("the page's grant value %q is not a grant", value)
	}
	g, err := b.Server.Store.GrantByHash(ctx, token.Hash(value))
	if err != nil || g.Box != "alpha" || g.Principal != "github:ann" || g.ExpiresAt.Sub(g.CreatedAt).String() != "2h0m0s" {
		t.Fatalf("the stored grant = %+v, %v, want github:ann's on alpha for 2h", g, err)
	}
	b.PaidBy(t, box, value, "visitor github:ann", visitorKey)

	// A principal with no credential: issued, with a warning.
	p = visit(t, b, "POST", "/ui/boxes/alpha/grants", cookie, url.Values{"csrf": {csrf}, "principal": {"github:bob"}}, nil)
	if p.status != 200 || !strings.Contains(p.body, "holds no credential") {
		t.Errorf("POST grants for github:bob = %d, want a warning that bob holds no credential:\n%s", p.status, p.body)
	}

	for _, path := range []string{"/ui/", "/ui/boxes/alpha"} {
		page := visit(t, b, "GET", path, cookie, nil, nil)
		if strings.Contains(page.body, value) || strings.Contains(page.body, g.Hash) {
			t.Errorf("GET %s shows the grant's value or hash", path)
		}
		if !strings.Contains(page.body, g.ID) && path != "/ui/" {
			t.Errorf("GET %s does not list grant %s", path, g.ID)
		}
	}
	if p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil); !strings.Contains(p.body, "2 current of 2 issued") {
		t.Errorf("GET /ui/boxes/alpha does not count alpha's grants:\n%s", p.body)
	}
}

// TestUI_MeasuredSpendAndBudgets: a box's card shows what the broker
// measured beside what the box reported, flagging a difference, and its
// budgets with what is spent and left.
func TestUI_MeasuredSpendAndBudgets(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	box := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	report := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}],` +
		`"spend":{"month":"` + monthNow() + `","usd":7.5,"runs":3,"unpriced":0,"byPrincipal":[{"principal":"github:ann","usd":7.5,"runs":3,"unpriced":0}]}}`
	if r := b.Do("POST", protocol.RouteDeclaration, box, []byte(report), nil); r.StatusCode != 200 {
		t.Fatalf("report = %d %s", r.StatusCode, r.Body)
	}
	b.PaidBy(t, box, "", "shared", sharedKey)
	brokertest.Usage(t, b.Server.Store, "alpha", spend.Month(time.Now()), 1)
	ctx := context.Background()
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "alpha", Limit: 25_000_000, UpdatedAt: timeNow()}); err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "alpha", Principal: "github:ann", Limit: 5_000_000, UpdatedAt: timeNow()}); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Server.Admin.Operator().Spend(ctx, "alpha", monthNow())
	if err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, b.AdminToken)
	for _, path := range []string{"/ui/boxes/alpha"} {
		p := visit(t, b, "GET", path, cookie, nil, nil)
		for _, want := range []string{
			"measured over 1 call in " + monthNow(), "$7.50</b> reported over 3 runs", "differs",
			"<b>the box</b>", "of $25.00", "<b>github:ann</b>", "of $5.00", "<b>$5.00</b> left",
			spend.FormatUSD(int64(math.Round(rep.MeasuredUSD * 1e6))), "<meter",
		} {
			if !strings.Contains(p.body, want) {
				t.Errorf("GET %s lacks %q", path, want)
			}
		}
	}
}
