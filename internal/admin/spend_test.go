package admin_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
)

func TestAdmin_Budgets(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	box := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.Report(box, brokertest.Entry("inference", "agent"))
	month := spend.Month(time.Now())

	var bv operator.BudgetView
	decode(t, "PUT box budget", b.Admin("PUT", "/api/boxes/alpha/budgets", tok, map[string]any{"usd": 25.5}), 200, &bv)
	if bv.Principal != nil || bv.USD != 25.5 || bv.Spent != 0 || bv.Held != 0 || bv.Left != 25.5 {
		t.Errorf("PUT box budget 25.5 = %+v, want the box's own at $25.50, all left", bv)
	}
	decode(t, "PUT ann's budget", b.Admin("PUT", "/api/boxes/alpha/budgets", tok, map[string]any{"usd": "0.000001", "principal": "github:ann"}), 200, &bv)
	if bv.Principal == nil || *bv.Principal != "github:ann" || bv.USD != 0.000001 {
		t.Errorf("PUT ann's budget = %+v, want github:ann at one micro-dollar", bv)
	}

	// A call is charged against the box's budget.
	b.PaidBy(t, box, "", "shared", sharedKey)
	brokertest.Usage(t, b.Server.Store, "alpha", spend.Month(time.Now()), 1)
	var list operator.BudgetList
	decode(t, "GET budgets", b.Admin("GET", "/api/boxes/alpha/budgets", tok, nil), 200, &list)
	if list.Month != month || !strings.HasPrefix(list.Resets, spend.Resets(month).Format("2006-01-02")) || len(list.Budgets) != 2 {
		t.Fatalf("GET budgets = %+v, want this month's two budgets", list)
	}
	own := list.Budgets[0]
	if own.Principal != nil || own.Spent <= 0 || own.Held != 0 || own.Left != own.USD-own.Spent {
		t.Errorf("GET budgets: the box's own = %+v, want something spent, nothing held, the rest left", own)
	}
	decode(t, "GET budgets of another month", b.Admin("GET", "/api/boxes/alpha/budgets?month=2001-01", tok, nil), 200, &list)
	if list.Month != "2001-01" || len(list.Budgets) != 2 || list.Budgets[0].Spent != 0 {
		t.Errorf("GET budgets?month=2001-01 = %+v, want both budgets, nothing spent", list)
	}

	// A budget set is in force at the next call; removed, likewise.
	decode(t, "PUT box budget 0", b.Admin("PUT", "/api/boxes/alpha/budgets", tok, map[string]any{"usd": 0, "principal": nil}), 200, nil)
	resp, _ := b.Call(t, box, "")
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 403 || !strings.Contains(msg, "budget") {
		t.Errorf("call over a budget set through the admin API = %d %q, want 403 naming the budget", resp.StatusCode, msg)
	}
	if resp := b.Admin("DELETE", "/api/boxes/alpha/budgets", tok, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE box budget = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	b.PaidBy(t, box, "", "shared", sharedKey)
	if resp := b.Admin("DELETE", "/api/boxes/alpha/budgets?principal=github:ann", tok, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE ann's budget = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	decode(t, "GET budgets after removing", b.Admin("GET", "/api/boxes/alpha/budgets", tok, nil), 200, &list)
	if len(list.Budgets) != 0 {
		t.Errorf("GET budgets after removing both = %+v, want none", list.Budgets)
	}

	bad := []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"negative", "PUT", "/api/boxes/alpha/budgets", map[string]any{"usd": -1}, 400},
		{"seven decimals", "PUT", "/api/boxes/alpha/budgets", map[string]any{"usd": 1.0000001}, 400},
		{"exponent", "PUT", "/api/boxes/alpha/budgets", map[string]any{"usd": 1e12}, 400},
		{"over a billion", "PUT", "/api/boxes/alpha/budgets", map[string]any{"usd": 1000000001}, 400},
		{"no usd", "PUT", "/api/boxes/alpha/budgets", map[string]any{"principal": "github:ann"}, 400},
		{"usd not a number", "PUT", "/api/boxes/alpha/budgets", map[string]any{"usd": "lots"}, 400},
		{"bad principal", "PUT", "/api/boxes/alpha/budgets", map[string]any{"usd": 1, "principal": "git hub"}, 400},
		{"no box", "PUT", "/api/boxes/nobox/budgets", map[string]any{"usd": 1}, 404},
		{"list of no box", "GET", "/api/boxes/nobox/budgets", nil, 404},
		{"bad month", "GET", "/api/boxes/alpha/budgets?month=2026-13", nil, 400},
		{"remove none", "DELETE", "/api/boxes/alpha/budgets", nil, 404},
		{"remove of no box", "DELETE", "/api/boxes/nobox/budgets", nil, 404},
		{"remove bad principal", "DELETE", "/api/boxes/alpha/budgets?principal=a%20b", nil, 400},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			refusal(t, tt.method+" "+tt.path, b.Admin(tt.method, tt.path, tok, tt.body), tt.status)
		})
	}
}

func TestAdmin_Spend(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	box := b.AddBox("alpha")
	b.AddBox("quiet")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	month := spend.Month(time.Now())
	report := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}],` +
		`"spend":{"month":"` + month + `","usd":3.25,"runs":4,"unpriced":0,"byPrincipal":[{"principal":"github:ann","usd":3.25,"runs":4,"unpriced":0}]}}`
	if resp := b.Do("POST", protocol.RouteDeclaration, box, []byte(report), nil); resp.StatusCode != 200 {
		t.Fatalf("report: %d %s", resp.StatusCode, resp.Body)
	}
	decode(t, "PUT visitor", b.Admin("PUT", "/api/visitors/github:ann", tok, admin.CredentialValue{Value: visitorKey}), 200, nil)
	var issued operator.IssuedGrant
	decode(t, "POST grant", b.Admin("POST", "/api/boxes/alpha/grants", tok, operator.NewGrant{Principal: "github:ann"}), 201, &issued)
	b.PaidBy(t, box, "", "shared", sharedKey)
	b.PaidBy(t, box, issued.Value, "visitor github:ann", visitorKey)
	b.PaidBy(t, box, issued.Value, "visitor github:ann", visitorKey)
	brokertest.Usage(t, b.Server.Store, "alpha", spend.Month(time.Now()), 3)

	// What one call costs: the stand-in reports 12 input and 6 output tokens.
	price, ok := spend.DefaultPrices().Lookup("claude-sonnet-4-5")
	if !ok {
		t.Fatal("claude-sonnet-4-5 is not in the default price table")
	}
	one := price.Cost(spend.Tokens{Input: 12, Output: 6})
	// micros is dollars as micro-dollars, as the broker counts them.
	micros := func(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

	var rep operator.SpendReport
	decode(t, "GET spend", b.Admin("GET", "/api/boxes/alpha/spend", tok, nil), 200, &rep)
	if rep.Box != "alpha" || rep.Month != month || rep.Calls != 3 || micros(rep.MeasuredUSD) != 3*one || micros(rep.ChargedUSD) != 3*one {
		t.Errorf("GET spend = %+v, want alpha this month, 3 calls measured at %d micro-dollars each", rep, one)
	}
	if rep.Reported == nil || rep.Reported.USD != 3.25 || rep.Reported.Runs != 4 || rep.ReportedAt == nil || rep.ReportedMonth == nil || !rep.Differs {
		t.Errorf("GET spend reported = %+v at %v, differs %v; want $3.25 in 4 runs, flagged as differing", rep.Reported, rep.ReportedAt, rep.Differs)
	}
	if len(rep.ByPrincipal) != 2 {
		t.Fatalf("GET spend by principal = %+v, want the shared calls and ann's", rep.ByPrincipal)
	}
	none, ann := rep.ByPrincipal[0], rep.ByPrincipal[1]
	if none.Principal != nil || none.Calls != 1 || micros(none.MeasuredUSD) != one || none.Reported != nil || none.Differs {
		t.Errorf("GET spend: the line of no principal = %+v, want 1 call measured, none reported, within a cent so not flagged", none)
	}
	if ann.Principal == nil || *ann.Principal != "github:ann" || ann.Calls != 2 || micros(ann.MeasuredUSD) != 2*one ||
		ann.Reported == nil || ann.Reported.USD != 3.25 || !ann.Differs {
		t.Errorf("GET spend: ann's line = %+v, want 2 calls measured beside $3.25 reported, flagged", ann)
	}
	if len(rep.Usage) != 2 {
		t.Fatalf("GET spend usage = %+v, want a row per payer", rep.Usage)
	}
	for _, u := range rep.Usage {
		if u.Model == nil || *u.Model != "claude-sonnet-4-5" || u.InputTokens != 12*u.Calls || u.OutputTokens != 6*u.Calls {
			t.Errorf("GET spend usage row = %+v, want claude-sonnet-4-5 at 12 in and 6 out per call", u)
		}
	}

	decode(t, "GET spend of another month", b.Admin("GET", "/api/boxes/alpha/spend?month=2001-01", tok, nil), 200, &rep)
	if rep.Calls != 0 || rep.Reported != nil || rep.ReportedMonth == nil || *rep.ReportedMonth != month || rep.Differs || len(rep.ByPrincipal) != 0 {
		t.Errorf("GET spend?month=2001-01 = %+v, want nothing measured and this month's report not compared", rep)
	}
	decode(t, "GET spend of a box that never reported", b.Admin("GET", "/api/boxes/quiet/spend", tok, nil), 200, &rep)
	if rep.Calls != 0 || rep.Reported != nil || rep.ReportedAt != nil || rep.ByPrincipal == nil || rep.Usage == nil {
		t.Errorf("GET quiet's spend = %+v, want nothing, with empty lists", rep)
	}
	refusal(t, "GET spend of no box", b.Admin("GET", "/api/boxes/nobox/spend", tok, nil), 404)
	refusal(t, "GET spend?month=10-2026", b.Admin("GET", "/api/boxes/alpha/spend?month=10-2026", tok, nil), 400)
}

// TestAdmin_PauseInForce: PATCH {"paused":true} refuses the box's next
// request; {"paused":false} serves it again.
func TestAdmin_PauseInForce(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	box := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.Report(box, brokertest.Entry("inference", "agent"))
	decode(t, "PATCH paused", b.Admin("PATCH", "/api/boxes/alpha", b.AdminToken, map[string]any{"paused": true}), 200, nil)
	resp, key := b.Call(t, box, "")
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 403 || !strings.Contains(msg, "paused by its owner") || key != "" {
		t.Errorf("call after PATCH paused = %d %q (upstream saw %q), want 403 paused and nothing forwarded", resp.StatusCode, msg, key)
	}
	decode(t, "PATCH resumed", b.Admin("PATCH", "/api/boxes/alpha", b.AdminToken, map[string]any{"paused": false}), 200, nil)
	b.PaidBy(t, box, "", "shared", sharedKey)
}
