package ui_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

func TestAdmin_RootRedirectsToThePage(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	for _, method := range []string{"GET", "HEAD"} {
		p := visit(t, b, method, "/", "", nil, nil)
		if p.status != http.StatusFound || p.header.Get("Location") != "/ui/" {
			t.Errorf("%s / = %d to %q, want 302 to /ui/", method, p.status, p.header.Get("Location"))
		}
	}
	// The Host check holds before the redirect: a name rebound to the
	// broker's address is refused.
	req, err := http.NewRequest("GET", b.AdminURL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example"
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("Location") != "" {
		t.Errorf("GET / with Host evil.example = %d to %q, want 421 and no redirect", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Only / itself: any other path the API does not serve is still a 404.
	if p := visit(t, b, "GET", "/nosuch", "", nil, nil); p.status != http.StatusNotFound {
		t.Errorf("GET /nosuch = %d, want 404", p.status)
	}
	if p := visit(t, b, "POST", "/", "", nil, nil); p.status == http.StatusFound {
		t.Errorf("POST / = %d, want no redirect", p.status)
	}
}

// settleFleet settles this month's calls straight into the store: alpha's
// shared calls on a priced model, beta's paid by github:ann on a model
// with no price (charged its $10 bound), and alpha's last month.
func settleFleet(t *testing.T, b *brokertest.Broker) (last string) {
	t.Helper()
	ctx := context.Background()
	st := b.Server.Store
	now := time.Now().UTC()
	month, last := spend.Month(now), spend.Month(now.AddDate(0, 0, -now.Day()))
	b.AddBox("alpha")
	b.AddBox("beta")
	for _, s := range []store.Settlement{
		{Box: "alpha", Month: month, Charge: 1_500_000,
			Usage: []store.Usage{{PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 3, InputTokens: 300, OutputTokens: 90, Cost: 1_500_000}}},
		{Box: "beta", Month: month, Principal: "github:ann", Charge: 10_000_000,
			Usage: []store.Usage{{PayerKind: "visitor", Model: "claude-opus-5-5", Calls: 1, Unpriced: 1, InputTokens: 5}}},
		{Box: "beta", Month: month, Charge: 250_000,
			Usage: []store.Usage{{PayerKind: "owner", Model: "claude-haiku-4-5", Calls: 2, Cost: 250_000}}},
		{Box: "alpha", Month: last, Charge: 7_000_000,
			Usage: []store.Usage{{PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 9, Cost: 7_000_000}}},
	} {
		for i := range s.Usage {
			s.Usage[i].Box, s.Usage[i].Month, s.Usage[i].Principal = s.Box, s.Month, s.Principal
		}
		if err := st.Settle(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// section is the part of body from the element with id to the end of its
// section.
func section(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("the page has no #%s", id)
	}
	j := strings.Index(body[i:], "</section>")
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}

func TestUI_FleetSpendByPayerAndModel(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	last := settleFleet(t, b)
	month := spend.Month(time.Now())
	cookie := signIn(t, b, b.AdminToken)

	p := visit(t, b, "GET", "/ui/spend", cookie, nil, nil)
	if p.status != 200 {
		t.Fatalf("GET /ui/spend = %d %s", p.status, p.body)
	}
	for id, wants := range map[string][]string{
		"fleet-total": {"<b>$1.75</b> measured", "<b>$11.75</b> charged over 6 calls", "1 unpriced",
			`id="unpriced">The broker has no price for claude-opus-5-5`},
		"by-payer":     {"<td>shared</td><td>(none)</td>", "<td>owner</td><td>(none)</td>", "<td>visitor</td><td>github:ann</td>"},
		"by-principal": {"<td>github:ann</td>", `<span class="warn" title="charged differs from measured">$10.00</span>`, "<td>(none)</td>", "$1.75"},
		"by-model":     {"<code>claude-opus-5-5</code> <span class=\"tag warn\">no price</span>", "<code>claude-sonnet-4-5</code></td>", "<code>claude-haiku-4-5</code></td>"},
		"by-box":       {`<a href="/ui/boxes/beta">beta</a>`, "$10.25", `<a href="/ui/boxes/alpha">alpha</a>`, "$1.50"},
		"export":       {`href="/ui/spend.csv?month=` + month + `&amp;by=usage"`, `href="/ui/spend.csv?month=` + month + `&amp;by=model"`, `href="/ui/audit.csv?since=720h"`},
	} {
		sec := section(t, p.body, id)
		for _, want := range wants {
			if !strings.Contains(sec, want) {
				t.Errorf("GET /ui/spend #%s lacks %q:\n%s", id, want, sec)
			}
		}
	}
	if strings.Count(section(t, p.body, "by-model"), "no price") != 1 {
		t.Errorf("GET /ui/spend marks more than the one unpriced model")
	}
	if !strings.Contains(p.body, "<h1>Spend in "+month) || !strings.Contains(p.body, `<input type="month" name="month" value="`+month+`"`) || !strings.Contains(p.body, `href="/ui/spend?month=`+last+`"`) {
		t.Errorf("GET /ui/spend has no month picker or link to %s", last)
	}

	p = visit(t, b, "GET", "/ui/spend?month="+last, cookie, nil, nil)
	if sec := section(t, p.body, "fleet-total"); p.status != 200 || !strings.Contains(sec, "<b>$7.00</b> measured · <b>$7.00</b> charged over 9 calls") ||
		strings.Contains(sec, "unpriced") {
		t.Errorf("GET /ui/spend?month=%s = %d, want last month's $7.00 over 9 calls:\n%s", last, p.status, sec)
	}
	if p := visit(t, b, "GET", "/ui/spend?month=2026-13", cookie, nil, nil); p.status != http.StatusBadRequest || !strings.Contains(p.body, "YYYY-MM") {
		t.Errorf("GET /ui/spend?month=2026-13 = %d, want 400 saying YYYY-MM", p.status)
	}

	// The list says the fleet's month, and links to the spend page.
	p = visit(t, b, "GET", "/ui/", cookie, nil, nil)
	if i := strings.Index(p.body, `id="fleet-spend"`); i < 0 || !strings.Contains(p.body[i:], "<b>$1.75</b> measured · <b>$11.75</b> charged over 6 calls") ||
		!strings.Contains(p.body[i:], `href="/ui/spend"`) {
		t.Errorf("GET /ui/ does not show the fleet's spend this month")
	}
	// A box's page shows charged beside measured, and its unpriced model.
	p = visit(t, b, "GET", "/ui/boxes/beta", cookie, nil, nil)
	for _, want := range []string{"<b>$0.25</b> measured over 3 calls", "<b>$10.25</b> charged", "<code>claude-opus-5-5</code> <span class=\"tag warn\">no price"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("GET /ui/boxes/beta lacks %q", want)
		}
	}
	// Every page keeps the policy: no script, no inline style.
	for _, path := range []string{"/ui/spend", "/ui/", "/ui/boxes/beta"} {
		p := visit(t, b, "GET", path, cookie, nil, nil)
		for _, bad := range []string{"style=", "<script", "href=\"javascript"} {
			if strings.Contains(p.body, bad) {
				t.Errorf("GET %s holds %q", path, bad)
			}
		}
		if csp := p.header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none';") {
			t.Errorf("GET %s Content-Security-Policy = %q", path, csp)
		}
	}
	// Signed out, the spend page and its downloads go to the sign-in.
	for _, path := range []string{"/ui/spend", "/ui/spend.csv", "/ui/audit.csv"} {
		if p := visit(t, b, "GET", path, "", nil, nil); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" || strings.Contains(p.body, "alpha") {
			t.Errorf("GET %s signed out = %d to %q, want 303 to /ui/", path, p.status, p.header.Get("Location"))
		}
	}
}

func TestUI_SpendAndAuditCSV(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	settleFleet(t, b)
	box := b.AddBox("gamma")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.Report(box, protocol.Capability{Name: "inference", Broker: "lobby", Scope: []string{"agent"}})
	b.PaidBy(t, box, "", "shared", sharedKey)
	ctx := context.Background()
	if err := b.Server.Store.AddAudit(ctx, []store.AuditEntry{{Box: "gamma", At: time.Now(), Method: "POST", Route: "/llm/anthropic/v1/messages",
		Capability: "inference", Status: 403, Reason: "declaration", Message: "+1+cmd|' /C calc'!A0"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, b.AdminToken)
	month := spend.Month(time.Now())
	for _, c := range []struct{ path, file, header string }{
		{"/ui/spend.csv?month=" + month + "&by=model", "boxbroker-spend-" + month + "-by-model.csv", "month,model,priced,calls"},
		{"/ui/spend.csv", "boxbroker-spend-" + month + "-by-usage.csv", "month,box,payer,principal,model"},
		{"/ui/audit.csv?since=720h", "boxbroker-audit-", "id,at,box,method,route"},
	} {
		p := visit(t, b, "GET", c.path, cookie, nil, nil)
		if p.status != 200 || p.header.Get("Content-Type") != "text/csv; charset=utf-8" {
			t.Fatalf("GET %s = %d %s, want 200 text/csv", c.path, p.status, p.header.Get("Content-Type"))
		}
		if _, params, err := mime.ParseMediaType(p.header.Get("Content-Disposition")); err != nil || !strings.HasPrefix(params["filename"], c.file) {
			t.Errorf("GET %s Content-Disposition = %q, want an attachment named %s", c.path, p.header.Get("Content-Disposition"), c.file)
		}
		if !strings.HasPrefix(p.body, c.header) {
			t.Errorf("GET %s begins %.60q, want %q", c.path, p.body, c.header)
		}
		for _, secret := range []string{box, sharedKey, b.AdminToken, cookie} {
			if strings.Contains(p.body, secret) {
				t.Errorf("GET %s holds a token or credential", c.path)
			}
		}
		rows, err := csv.NewReader(bytes.NewReader([]byte(p.body))).ReadAll()
		if err != nil || len(rows) < 2 {
			t.Fatalf("GET %s = %v %q, want CSV rows", c.path, err, p.body)
		}
		for _, r := range rows {
			for _, cell := range r {
				if cell != "" && strings.ContainsRune("=+-@", rune(cell[0])) {
					t.Errorf("GET %s holds cell %q, which a spreadsheet runs", c.path, cell)
				}
			}
		}
	}
	p := visit(t, b, "GET", "/ui/audit.csv?since=720h", cookie, nil, nil)
	if !strings.Contains(p.body, "'+1+cmd") || !strings.Contains(p.body, "gamma,POST,/llm/anthropic/v1/messages,inference,agent,200") {
		t.Errorf("GET /ui/audit.csv lacks the served call or the refusal written as text:\n%s", p.body)
	}
}

// TestUI_CSVDownloadsAreTheAPIs: each of the page's CSV downloads (the
// spend in every grain and month form, the audit log with its filters,
// and a refusal) answers the same status, headers and bytes as the admin
// API's download of the same query, since one handler writes both.
func TestUI_CSVDownloadsAreTheAPIs(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	settleFleet(t, b)
	ctx := context.Background()
	if err := b.Server.Store.AddAudit(ctx, []store.AuditEntry{{Box: "alpha", At: time.Now(), Method: "POST", Route: "/llm/anthropic/v1/messages",
		Capability: "inference", Status: 403, Reason: "declaration", Message: "=HYPERLINK(\"x\")", Words: []string{"agent"}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cookie := signIn(t, b, b.AdminToken)
	month := spend.Month(time.Now())
	queries := []string{"spend.csv", "spend.csv?month=" + month, "spend.csv?month=2026-01&by=box", "spend.csv?by=nothing", "spend.csv?month=26"}
	for _, by := range admin.SpendCSVGrains {
		queries = append(queries, "spend.csv?month="+month+"&by="+by)
	}
	queries = append(queries, "audit.csv", "audit.csv?since=720h", "audit.csv?box=alpha&refusals=true&limit=5", "audit.csv?limit=0", "audit.csv?since=forever")
	for _, q := range queries {
		ui := visit(t, b, "GET", "/ui/"+q, cookie, nil, nil)
		api := b.Admin("GET", "/api/"+q, b.AdminToken, nil)
		if api.StatusCode == http.StatusOK && (ui.status != api.StatusCode || ui.body != string(api.Body)) {
			t.Errorf("GET /ui/%s = %d\n%s\nwant GET /api/%s's %d\n%s", q, ui.status, ui.body, q, api.StatusCode, api.Body)
		}
		if (ui.status == http.StatusOK) != (api.StatusCode == http.StatusOK) || ui.status/100 != api.StatusCode/100 {
			t.Errorf("GET /ui/%s = %d, GET /api/%s = %d, want both to succeed or fail alike", q, ui.status, q, api.StatusCode)
		}
		for _, h := range []string{"Content-Type", "Content-Disposition"} {
			if api.StatusCode != http.StatusOK {
				break
			}
			u, a := ui.header.Get(h), api.Header.Get(h)
			if strings.HasPrefix(q, "audit.csv") { // named for the second it was written
				u, a = u[:len(u)-len("0405Z.csv\"")], a[:len(a)-len("0405Z.csv\"")]
			}
			if u != a {
				t.Errorf("GET /ui/%s %s = %q, want the API's %q", q, h, ui.header.Get(h), api.Header.Get(h))
			}
		}
	}
}

// BenchmarkFleetSpendRead measures the spend page's and the list's read
// of the fleet's month: two queries and a pass in memory.
func BenchmarkFleetSpendRead(b *testing.B) {
	br := brokertest.New(b, brokertest.Options{})
	seedFleet(b, br, 1000, 1)
	month := spend.Month(time.Now())
	b.ResetTimer()
	for b.Loop() {
		if _, err := br.Server.Admin.FleetSpend(context.Background(), month); err != nil {
			b.Fatal(err)
		}
	}
}
