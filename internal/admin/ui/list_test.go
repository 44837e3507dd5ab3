package ui_test

import (
	"github.com/intentius/boxbroker/internal/admin/ui"

	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// seedFleet enrols n boxes named box-0000... straight into the store, most
// of them reported (one in seven never), with requests and refusals over
// the last 7 days (perDay entries a day each), a budget on one in five (one
// in ten of those spent), a secret declared and not held on one in
// eleven, and one in thirteen paused. Entries carry bytes, and a
// budgeted box's served ones a cost, this month's summing to its measured
// spend.
func seedFleet(tb testing.TB, b *brokertest.Broker, n, perDay int) {
	tb.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("box-%04d", i)
	}
	seedFleetNamed(tb, b, names, perDay)
}

// fleetNames are the boxes of the screenshots' fleet.
var fleetNames = strings.Fields(`atlas birch cedar delphi ember fjord garnet harbor iris juniper kestrel lumen
	meadow nectar onyx prairie quartz raven sable tundra umber violet willow xenon yarrow zephyr
	acorn bramble cobalt dune ferry glade heron inlet jasper kelp lark mica`)

// titles are the seeded boxes' listing titles.
var titles = []string{"Answers questions about the repo", "Reviews pull requests", "Writes release notes", "Triages issues",
	"Drafts replies to support mail", "Keeps the docs in step", "Plans the week's work"}

// seedFleetNamed is seedFleet with the boxes' names.
func seedFleetNamed(tb testing.TB, b *brokertest.Broker, names []string, perDay int) {
	tb.Helper()
	n := len(names)
	ctx := context.Background()
	st := b.Server.Store
	now := time.Now().UTC()
	month := now.Format("2006-01")
	var audit []store.AuditEntry
	for i := range n {
		name := names[i]
		tok, err := token.NewBox()
		if err != nil {
			tb.Fatal(err)
		}
		if err := st.CreateBox(ctx, store.Box{Name: name, TokenHash: token.Hash(tok), CreatedAt: now, PayerKind: "shared", Paused: i%13 == 12}); err != nil {
			tb.Fatal(err)
		}
		if i%7 != 6 {
			scope := `"agent"`
			egress := ""
			if i%11 == 10 {
				egress = `,{"name":"egress","broker":"lobby","scope":["STRIPE"]}`
			}
			doc := fmt.Sprintf(`{"capabilities":[{"name":"inference","broker":"lobby","scope":[%s]}%s],"listing":{"published":%t,"title":"%s","line":"A box of the studio"}}`,
				scope, egress, i%2 == 0, titles[i%len(titles)])
			if _, err := st.SaveDeclaration(ctx, name, token.Hash(tok), []byte(doc), now.Add(-time.Duration(i)*time.Minute)); err != nil {
				tb.Fatal(err)
			}
		}
		var charge int64 // this month's measured spend, also spread over its audit entries
		if i%5 == 0 {
			limit := int64(10_000_000)
			if err := st.SetBudget(ctx, store.Budget{Box: name, Limit: limit, UpdatedAt: now}); err != nil {
				tb.Fatal(err)
			}
			charge = int64(i%97) * 50_000
			if i%10 == 0 && i%20 == 0 {
				charge = limit
			}
			if err := st.Settle(ctx, store.Settlement{Box: name, Month: month, Charge: charge,
				Usage: []store.Usage{{Box: name, Month: month, PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: int64(i%97 + 1), Cost: charge}}}); err != nil {
				tb.Fatal(err)
			}
		}
		first := len(audit)
		for j := range 7 * perDay {
			at := now.Add(-time.Duration(j) * 24 * time.Hour / time.Duration(perDay)).Add(-time.Duration(i) * time.Second)
			// More by day than by night, and some boxes busier, for the
			// pictures; the tests' fleets (perDay <= 4) make one a slot.
			k := 1
			if perDay > 4 {
				k = (i % 3) + map[bool]int{true: 3, false: 0}[at.Hour() >= 8 && at.Hour() < 20] + (j*7+i*3)%3 - 1
			}
			for m := range k {
				e := store.AuditEntry{Box: name, At: at.Add(-time.Duration(m) * time.Second),
					Method: "POST", Route: "/llm/anthropic/v1/messages", Capability: "inference", Words: []string{"agent"},
					Status: 200, UpstreamStatus: 200, Duration: time.Duration(400+(i*37+j*11+m)%1600) * time.Millisecond,
					Bytes: int64(600 + (i*131+j*17+m*7)%30000)}
				if (i+j+m)%9 == 0 {
					e.Status, e.Reason, e.Message, e.UpstreamStatus = 403, "declaration", "This box's inference capability does not list agent in its scope.", 0
					e.Bytes = 212
				}
				audit = append(audit, e)
			}
		}
		spreadCost(audit[first:], charge, month)
		if len(audit) > 4000 {
			if err := st.AddAudit(ctx, audit); err != nil {
				tb.Fatal(err)
			}
			audit = audit[:0]
		}
	}
	if err := st.AddAudit(ctx, audit); err != nil {
		tb.Fatal(err)
	}
}

// spreadCost gives the served entries among entries a cost each, those
// of month summing to charge (as the broker's measured usage does), the
// earlier ones costing as much a call.
func spreadCost(entries []store.AuditEntry, charge int64, month string) {
	var n int64
	for _, e := range entries {
		if e.Reason == "" && e.At.Format("2006-01") == month {
			n++
		}
	}
	if n == 0 || charge == 0 {
		return
	}
	each, left := charge/n, charge
	for k := range entries {
		e := &entries[k]
		if e.Reason != "" {
			continue
		}
		e.Cost = each
		if e.At.Format("2006-01") == month {
			if n--; n == 0 {
				e.Cost = left
			}
			left -= e.Cost
		}
	}
}

// get fetches path from the admin listener with the session cookie.
func get(tb testing.TB, b *brokertest.Broker, path, cookie string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest("GET", b.AdminURL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: cookie})
	resp, err := noRedirect.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// signInTB is signIn for a benchmark.
func signInTB(tb testing.TB, b *brokertest.Broker) string {
	tb.Helper()
	resp, err := noRedirect.PostForm(b.AdminURL+"/ui/signin", url.Values{"token": {b.AdminToken}})
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == ui.SessionCookie {
			return c.Value
		}
	}
	tb.Fatalf("sign-in set no cookie (status %d)", resp.StatusCode)
	return ""
}

// rowNames are the box names of a list page's rows, in order.
func rowNames(body string) []string {
	var out []string
	for _, part := range strings.Split(body, `<td><a href="/ui/boxes/`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}

// TestUI_ListSortsFiltersPages: the list pages by 50, sorts by a column
// both ways, filters by name and by state, and counts each state.
func TestUI_ListSortsFiltersPages(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	seedFleet(t, b, 60, 2)
	cookie := signIn(t, b, b.AdminToken)

	_, body := get(t, b, "/ui/", cookie)
	if got := rowNames(body); len(got) != 50 || got[0] != "box-0000" || got[49] != "box-0049" {
		t.Errorf("GET /ui/ rows = %d from %v, want box-0000 to box-0049", len(got), got[:min(len(got), 3)])
	}
	if !strings.Contains(body, `href="/ui/?page=2"`) || !strings.Contains(body, "60 boxes") {
		t.Errorf("GET /ui/ has no link to page 2 of 60 boxes")
	}
	_, body = get(t, b, "/ui/?page=2", cookie)
	if got := rowNames(body); len(got) != 10 || got[0] != "box-0050" {
		t.Errorf("GET /ui/?page=2 rows = %d from %v, want 10 from box-0050", len(got), got[:min(len(got), 1)])
	}
	_, body = get(t, b, "/ui/?page=99", cookie)
	if got := rowNames(body); len(got) != 10 {
		t.Errorf("GET /ui/?page=99 rows = %d, want the last page's 10", len(got))
	}
	_, body = get(t, b, "/ui/?sort=name&desc=1", cookie)
	if got := rowNames(body); len(got) == 0 || got[0] != "box-0059" {
		t.Errorf("GET /ui/?sort=name&desc=1 first row = %v, want box-0059", got[:min(len(got), 1)])
	}
	_, body = get(t, b, "/ui/?sort=spend&desc=1", cookie)
	if got := rowNames(body); len(got) < 4 || fmt.Sprint(got[:4]) != "[box-0000 box-0020 box-0040 box-0055]" {
		t.Errorf("GET /ui/?sort=spend&desc=1 first rows = %v, want the three that spent their budget, then box-0055", got[:min(len(got), 4)])
	}
	_, body = get(t, b, "/ui/?q=box-001", cookie)
	if got := rowNames(body); len(got) != 10 {
		t.Errorf("GET /ui/?q=box-001 = %v, want the 10 of box-0010..0019", got)
	}
	tests := []struct {
		state string
		want  []string
	}{
		// Paused first, then never reported, then blocked, then secrets.
		{"paused", []string{"box-0012", "box-0025", "box-0038", "box-0051"}},
		{"never", []string{"box-0006", "box-0013", "box-0020", "box-0027", "box-0034", "box-0041", "box-0048", "box-0055"}},
		{"blocked", []string{"box-0000", "box-0040"}},
		{"secrets", []string{"box-0010", "box-0021", "box-0032", "box-0043", "box-0054"}},
	}
	for _, tt := range tests {
		_, body := get(t, b, "/ui/?state="+tt.state, cookie)
		if got := rowNames(body); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("GET /ui/?state=%s = %v, want %v", tt.state, got, tt.want)
		}
	}
	for _, bad := range []string{"/ui/?sort=%3Cscript%3E", "/ui/?page=-4", "/ui/?state=nope", "/ui/?q=" + strings.Repeat("x", 5000)} {
		if status, body := get(t, b, bad, cookie); status != 200 || strings.Contains(body, "<script>") {
			t.Errorf("GET %s = %d, want 200 with the query ignored or cut", bad, status)
		}
	}
}

// BenchmarkUI_List renders the list page's first page, sorted by spend,
// for a fleet of 10 and of 1,000 boxes with 7 days of audit (24 entries a
// box a day): compare the two ns/op for the cost of the fleet's size.
func BenchmarkUI_List(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("boxes=%d", n), func(b *testing.B) {
			br := brokertest.New(b, brokertest.Options{})
			seedFleet(b, br, n, 24)
			cookie := signInTB(b, br)
			b.ResetTimer()
			for b.Loop() {
				if status, _ := get(b, br, "/ui/?sort=spend&desc=1", cookie); status != 200 {
					b.Fatalf("GET /ui/ = %d", status)
				}
			}
		})
	}
}

// TestUI_PicturesAndLogKeepThePolicy: the pictures are inline SVG with no
// script, no inline style and no image source, under the same
// Content-Security-Policy; a box's request log pages by links.
func TestUI_PicturesAndLogKeepThePolicy(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	seedFleet(t, b, 2, 4) // 28 entries a box
	cookie := signIn(t, b, b.AdminToken)
	for _, path := range []string{"/ui/", "/ui/boxes/box-0000"} {
		p := visit(t, b, "GET", path, cookie, nil, nil)
		if p.status != 200 || !strings.Contains(p.body, `<svg class="chart"`) || !strings.Contains(p.body, `class="served"`) || !strings.Contains(p.body, `class="refused"`) {
			t.Errorf("GET %s = %d, want a chart of served and refused requests", path, p.status)
		}
		for _, bad := range []string{"style=", "<script", "<img", "href=\"javascript", "<foreignObject"} {
			if strings.Contains(p.body, bad) {
				t.Errorf("GET %s holds %q", path, bad)
			}
		}
		if csp := p.header.Get("Content-Security-Policy"); csp != "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" {
			t.Errorf("GET %s Content-Security-Policy = %q", path, csp)
		}
	}
	log := func(page string) (rows int, body string) {
		t.Helper()
		p := visit(t, b, "GET", "/ui/boxes/box-0000"+page, cookie, nil, nil)
		i := strings.Index(p.body, `id="log"`)
		if i < 0 {
			t.Fatalf("GET /ui/boxes/box-0000%s has no request log", page)
		}
		return strings.Count(p.body[i:], "<tr>") - 1, p.body[i:]
	}
	if n, body := log(""); n != 25 || !strings.Contains(body, `href="/ui/boxes/box-0000?log=2#log"`) || strings.Contains(body, "newer") {
		t.Errorf("the log's first page = %d rows, want 25 and a link to page 2 only", n)
	}
	if n, body := log("?log=2"); n != 3 || !strings.Contains(body, `href="/ui/boxes/box-0000?log=1#log"`) || strings.Contains(body, "older") {
		t.Errorf("the log's second page = %d rows, want 3 and a link back only", n)
	}
	if n, _ := log("?log=-3"); n != 25 {
		t.Errorf("the log at page -3 = %d rows, want the first page's 25", n)
	}
}
